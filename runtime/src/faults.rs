//! The fault vocabulary the runtime's drivers use: the typed values of
//! [`ftcoll_algos::fault`], shared with the console. Text specs are parsed by the launcher.

pub use ftcoll_algos::fault::{
    FaultDecodeError, FaultError, FaultSpec, FaultTime, FlipTarget, KillTime, MessageSelector,
    Spread,
};
