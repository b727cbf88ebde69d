//! Helpers the adapters' tests share: real servers started on loopback in temporary directories, removed by a drop guard.

pub mod mariadb;
