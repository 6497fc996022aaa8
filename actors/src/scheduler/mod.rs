//! Input scheduling: task classes, interrupt levels, preemption at safe points.
//!
//! * [`level`]: levels L1-L4 and how an interrupt's level is decided;
//! * [`core`]: the scheduler's state and rules as a plain struct.
//!
//! The actors around them (EventLoop, InterceptLoop, Scheduler, tasks) are the next
//! step; see `docs/ARCHITECTURE.md`.

pub mod core;
pub mod level;

pub use self::core::{Class, Core, Kind, Meta, Pick, Snapshot, Stats, Task, TaskLabel, can_preempt};
pub use self::level::{Level, UnknownLevel, interrupt_level, source_root};
