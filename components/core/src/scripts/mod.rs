//! One typed definition per Lua script, beside its `.lua` file (see
//! [`crate::script`] for the convention). Call sites build these values;
//! nothing else encodes a script's keys and arguments or reads its reply.

mod adopt;
mod badge;
mod category_inventory;
mod clear_category;
mod clocks;
mod common;
mod dataset;
mod forget_head;
mod forget_joiners;
mod forget_loaded;
mod forget_unannounced;
mod group_logs;
mod heads;
mod join;
mod joining;
mod leave;
mod list;
mod mark_read;
mod ping;
mod previews;
mod rebuild;
mod recall;
mod set_flag;
mod touch;
mod versions;
mod walk_users;

pub use adopt::Adopt;
pub use badge::Badge;
pub use category_inventory::{CategoryInventory, Inventory};
pub use clear_category::{ClearCategory, Clearing};
pub use clocks::{ClockMove, MoveClocks};
pub use common::{Loaded, Members, badge_of};
pub use dataset::{Dataset, DatasetRecord};
pub use forget_head::ForgetHead;
pub use forget_joiners::ForgetJoiners;
pub use forget_loaded::ForgetLoaded;
pub use forget_unannounced::ForgetUnannounced;
pub use group_logs::{GroupLogs, LogsWanted, NO_LOGS_YET, WantedLog, logs_wanted};
pub use heads::Heads;
pub use join::Join;
pub use joining::{HeadRead, RecordJoiners};
pub use leave::Leave;
pub use list::{List, ListCursor};
pub use mark_read::MarkRead;
pub use ping::Ping;
pub use previews::{NO_PREVIEW, Previews};
pub use rebuild::{Rebuild, Rebuilt, TruthUser};
pub use recall::{Recall, Recalled};
pub use set_flag::{FlagSet, SetFlag};
pub use touch::{Role, Touch, TouchMode, Touched};
pub use versions::Versions;
pub use walk_users::WalkUsers;

#[cfg(test)]
mod header_tests;

#[cfg(test)]
mod formula_tests;
