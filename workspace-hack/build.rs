//! Empty: present so that the build-dependencies above take part in feature
//! resolution.
fn main() {}
