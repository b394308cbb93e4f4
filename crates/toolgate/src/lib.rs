//! toolgate
