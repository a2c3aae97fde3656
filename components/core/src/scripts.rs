//! The Lua scripts, each in its own file, with the shared layout prepended.

use std::sync::LazyLock;
use std::time::Duration;

/// One script per call of the contract.
#[derive(Clone, Copy, Debug)]
pub enum Script {
    Touch,
    MarkRead,
    List,
    Badge,
    Versions,
    Rebuild,
    Delete,
    SetFlag,
    Recall,
    CategoryInventory,
    ClearCategory,
    WalkUsers,
    Join,
}

/// A script's full source and the SHA1 that `EVALSHA` names it by.
pub struct Source {
    pub text: &'static str,
    pub sha1: String,
}

macro_rules! with_layout {
    ($file:literal) => {
        concat!(include_str!("lua/layout.lua"), "\n", include_str!($file))
    };
}

static TOUCH: LazyLock<Source> = LazyLock::new(|| Source::new(with_layout!("lua/touch.lua")));
static MARK_READ: LazyLock<Source> = LazyLock::new(|| Source::new(with_layout!("lua/mark_read.lua")));
static LIST: LazyLock<Source> = LazyLock::new(|| Source::new(with_layout!("lua/list.lua")));
static BADGE: LazyLock<Source> = LazyLock::new(|| Source::new(with_layout!("lua/badge.lua")));
static VERSIONS: LazyLock<Source> = LazyLock::new(|| Source::new(with_layout!("lua/versions.lua")));
static REBUILD: LazyLock<Source> = LazyLock::new(|| Source::new(with_layout!("lua/rebuild.lua")));
static DELETE: LazyLock<Source> = LazyLock::new(|| Source::new(with_layout!("lua/delete.lua")));
static SET_FLAG: LazyLock<Source> = LazyLock::new(|| Source::new(with_layout!("lua/set_flag.lua")));
static RECALL: LazyLock<Source> = LazyLock::new(|| Source::new(with_layout!("lua/recall.lua")));
static CATEGORY_INVENTORY: LazyLock<Source> = LazyLock::new(|| Source::new(with_layout!("lua/category_inventory.lua")));
static CLEAR_CATEGORY: LazyLock<Source> = LazyLock::new(|| Source::new(with_layout!("lua/clear_category.lua")));
static WALK_USERS: LazyLock<Source> = LazyLock::new(|| Source::new(with_layout!("lua/walk_users.lua")));
static JOIN: LazyLock<Source> = LazyLock::new(|| Source::new(with_layout!("lua/join.lua")));

impl Source {
    fn new(text: &'static str) -> Self {
        Source { text, sha1: sha1_smol::Sha1::from(text).digest().to_string() }
    }
}

impl Script {
    /// How long a call may wait for Redis: the per-user scripts answer in
    /// milliseconds; the batch scripts of reconcile and clear-category (100
    /// users a call) get longer.
    pub fn deadline(self) -> Duration {
        match self {
            Script::Rebuild | Script::CategoryInventory | Script::ClearCategory | Script::WalkUsers => {
                Duration::from_secs(10)
            }
            _ => Duration::from_secs(2),
        }
    }

    /// The script's source and digest.
    pub fn source(self) -> &'static Source {
        match self {
            Script::Touch => &TOUCH,
            Script::MarkRead => &MARK_READ,
            Script::List => &LIST,
            Script::Badge => &BADGE,
            Script::Versions => &VERSIONS,
            Script::Rebuild => &REBUILD,
            Script::Delete => &DELETE,
            Script::SetFlag => &SET_FLAG,
            Script::Recall => &RECALL,
            Script::CategoryInventory => &CATEGORY_INVENTORY,
            Script::ClearCategory => &CLEAR_CATEGORY,
            Script::WalkUsers => &WALK_USERS,
            Script::Join => &JOIN,
        }
    }
}
