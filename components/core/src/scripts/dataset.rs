//! `dataset.lua`: the record of the data set a cache-only unread writes to.

use crate::Error;
use crate::keys::dataset_key;
use crate::script::{Call, Lua, Reply, Script, lua};

/// Reads (or starts) the data set's record, given the one this instance
/// saw before (`remembered`, empty if none).
pub struct Dataset {
    pub remembered: String,
}

/// The data set's record.
pub struct DatasetRecord {
    pub id: String,
    /// When a loss was first seen (ms), if one was.
    pub lost_at: Option<u64>,
}

impl Script for Dataset {
    type Reply = DatasetRecord;
    const WAITS_FOR_REPLICAS: bool = false;

    fn lua() -> &'static Lua {
        lua!("dataset.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.key("dataset", dataset_key());
        call.arg("remembered", &self.remembered);
    }

    fn decode(&self, reply: &mut Reply) -> Result<DatasetRecord, Error> {
        let id = reply.text()?;
        let lost = reply.text()?;
        let lost_at = if lost.is_empty() { None } else { Some(lost.parse().map_err(|_| crate::script::malformed())?) };
        Ok(DatasetRecord { id, lost_at })
    }
}
