//! placeholder: estimator helper implements

#[derive(Clone, Debug)]
pub struct WorkingSetProbe;
