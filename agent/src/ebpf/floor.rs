//! The benchmarks' floor: the object's empty classifier, attached like the
//! real one, so the cost of the hook itself can be subtracted. Built only with
//! the `bench` feature; the agent never attaches it.

use aya::{Ebpf, programs::TcAttachType};
use ipshadow_common::FLOOR_PROGRAM_NAME;

use super::{
    AttachMode, Error, ProgramStats, Result, attach_options, load_object, program, program_stats,
};

/// The empty classifier of the same object, attached like the real one: what
/// benchmarks compare against (the cost of the hook and of measuring it).
pub struct Floor {
    ebpf: Ebpf,
}

impl Floor {
    /// Loads the empty classifier and attaches it to the ingress of `iface`.
    pub fn attach(iface: &str, mode: AttachMode) -> Result<Self> {
        let mut ebpf = load_object()?;
        let prog = program(&mut ebpf, FLOOR_PROGRAM_NAME)?;
        prog.load().map_err(|cause| Error::Program {
            action: "loading the floor classifier",
            cause,
        })?;
        prog.attach_with_options(iface, TcAttachType::Ingress, attach_options(iface, mode))
            .map_err(|cause| Error::Program {
                action: "attaching the floor classifier",
                cause,
            })?;
        Ok(Self { ebpf })
    }

    /// Its kernel id and run statistics.
    pub fn program_stats(&mut self) -> Result<ProgramStats> {
        program_stats(program(&mut self.ebpf, FLOOR_PROGRAM_NAME)?)
    }
}
