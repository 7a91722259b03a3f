//! Products spread over several processors (GPUs of one host, MPI ranks):
//! the decomposition planner, plain data shared by every distributed
//! backend and tested without any of them.

pub mod planner;
