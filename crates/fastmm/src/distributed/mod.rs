//! Products spread over several processors (GPUs of one host, MPI ranks):
//! the decomposition planner and the schedule it implies, plain data
//! shared by every distributed backend and tested without any of them.
//! Each backend runs a schedule: `cpu::distributed` (the CPU standing in
//! for every processor, so that CI runs the algorithm) and
//! `cuda::distributed` (GPUs through NCCL).

pub mod planner;
pub mod schedule;
