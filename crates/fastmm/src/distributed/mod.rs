//! Products spread over several processors (GPUs of one host, MPI ranks):
//! the decomposition planner and the schedule it implies, plain data
//! shared by every distributed backend and tested without any of them,
//! and the CPU standing in for every processor, which runs a schedule in
//! CI.

pub mod host;
pub mod planner;
pub mod schedule;
