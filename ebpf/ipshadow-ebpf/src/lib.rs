#![no_std]
// This file exists so the crate has a library target: the agent lists this crate
// as a build-dependency (for rebuild tracking), which needs one.
