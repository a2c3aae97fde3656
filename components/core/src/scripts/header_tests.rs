//! Every script's Rust encoder against its Lua header: the names and the
//! order of keys and arguments must be the same on both sides.

use std::collections::BTreeMap;

use super::group_logs::LOGS_WANTED;
use super::*;
use crate::bindings::unread::core::types::ConversationFlag;
use crate::config::Limits;
use crate::keys::{CONVERSATION_KEYS, USER_KEYS, slot};
use crate::script::{Call, Names, Script};
use crate::sql::TruthRow;

/// The calling convention a script's `declare { ... }` header states.
fn header(lua: &str) -> Names {
    let start = lua.find("declare {").expect("the script declares its convention") + "declare ".len();
    let body = balanced(&lua[start..]);
    let inner = &body[1..body.len() - 1];
    let each = field(inner, "each").map(|each| balanced(each)[1..].to_string()).unwrap_or_default();
    let top = match inner.find("each =") {
        Some(at) => &inner[..at],
        None => inner,
    };
    Names {
        keys: names(field(top, "keys")),
        args: names(field(top, "args")),
        each_keys: names(field(&each, "keys")),
        each_args: names(field(&each, "args")),
    }
}

/// The text from an opening brace to its matching closing one.
fn balanced(text: &str) -> &str {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &text[..=i];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced braces in a declare header")
}

/// What follows `name =` in `text`, if it is there.
fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let at = text.find(&format!("{name} ="))?;
    Some(text[at + name.len() + 2..].trim_start())
}

/// `USER_KEYS` or a `{'a', 'b'}` list at the start of `value`.
fn names(value: Option<&str>) -> Vec<&'static str> {
    let Some(value) = value else { return Vec::new() };
    if value.starts_with("USER_KEYS") {
        return USER_KEYS.to_vec();
    }
    if value.starts_with("CONVERSATION_KEYS") {
        return CONVERSATION_KEYS.to_vec();
    }
    balanced(value).split('\'').skip(1).step_by(2).map(|name| &*Box::leak(name.to_string().into_boxed_str())).collect()
}

fn encoded(script: &impl Script) -> (&'static str, Call) {
    let mut call = Call::default();
    script.encode(&mut call);
    (script_file::<_>(script), call)
}

fn script_file<S: Script>(_: &S) -> &'static str {
    S::lua().file
}

fn users() -> Vec<String> {
    vec!["u1".into(), "u2".into()]
}

/// A listed row of `conversation` whose last message is `last`.
fn row_of(conversation: &str, last: u64) -> crate::bindings::unread::core::types::Conversation {
    crate::bindings::unread::core::types::Conversation {
        id: conversation.into(),
        category: "chat".into(),
        unread: 0,
        last_seq: last,
        read_seq: last,
        ts: 1,
        preview: NO_PREVIEW.into(),
        mentions: 0,
        muted: false,
        pinned: false,
        marked_unread: false,
    }
}

/// One call of every script.
fn sample_calls() -> BTreeMap<&'static str, Call> {
    let users = users();
    let other = TruthRow { conversation: "d".into(), ..TruthRow::sample() };
    let members = || Members { tenant: "t", users: &users };
    let row = TruthRow::sample();
    let cursor = ListCursor { section: 0, score: 5, conversation: "c".into() };
    let flag = ConversationFlag::Muted(true);
    let limits = Limits { max_conversations: 100, max_kept: 1000 };
    let pairs = vec![("t".to_string(), "u1".to_string()), ("t".to_string(), "u2".to_string())];
    [
        encoded(&Touch {
            tenant: "t",
            conversation: "c",
            seq: 1,
            score: 1001,
            category: "chat",
            preview: "{}",
            mention_all: false,
            max_conversations: 100,
            max_kept: 1000,
            require_loaded: false,
            members: vec![("u1".into(), Role::Sender), ("u2".into(), Role::Mentioned)],
            mode: TouchMode::All,
            large_threshold: 100,
            named: 2,
            large: None,
            late: None,
            large_in_truth: false,
            category_in_truth: false,
            sender_marked: None,
        }),
        encoded(&MarkRead {
            tenant: "t",
            user: "u",
            conversation: "c",
            seq: 1,
            ahead: 10,
            max_conversations: 100,
            max_kept: 1000,
            require_loaded: true,
        }),
        encoded(&List {
            tenant: "t",
            user: "u",
            limit: 20,
            after: Some(&cursor),
            category: None,
            require_loaded: false,
            limits,
        }),
        encoded(&Badge { users: members(), require_loaded: false, limits }),
        encoded(&SetFlag {
            tenant: "t",
            user: "u",
            conversation: "c",
            flag: &flag,
            max_pins: 5,
            max_conversations: 100,
            max_kept: 1000,
            require_loaded: false,
        }),
        encoded(&Recall {
            conversation: "c",
            seq: 1,
            preview: "",
            max_conversations: 100,
            max_kept: 1000,
            require_loaded: false,
            members: members(),
        }),
        encoded(&Join {
            conversation: "c",
            seq: 1,
            max_conversations: 100,
            max_kept: 1000,
            members: members(),
            head: Some(&HeadRead::default()),
        }),
        encoded(&RecordJoiners { tenant: "t", conversation: "c", users: &users }),
        encoded(&ForgetJoiners { tenant: "t", conversation: "c", users: &users }),
        encoded(&ForgetUnannounced { tenant: "t", conversation: "c", seq: 7 }),
        encoded(&Adopt { conversation: "c", members: members() }),
        encoded(&Leave {
            conversation: "c",
            max_conversations: 100,
            max_kept: 1000,
            require_loaded: false,
            members: members(),
        }),
        encoded(&CategoryInventory { category: "chat", members: members(), limits, require_loaded: true }),
        encoded(&ClearCategory {
            tenant: "t",
            category: "chat",
            max_conversations: 100,
            max_kept: 1000,
            require_loaded: true,
            clearings: vec![
                Clearing { user: "u", conversation: "c", seq: 3 },
                Clearing { user: "v", conversation: "c", seq: 3 },
            ],
        }),
        encoded(&Rebuild {
            tenant: "t",
            users: vec![
                TruthUser { user: "u", version: "3", partial: false, rows: vec![&row] },
                TruthUser { user: "v", version: "3", partial: false, rows: vec![&other] },
            ],
            load_empty: false,
            settle: false,
            limits,
        }),
        encoded(&Versions { tenant: "t", users: &users }),
        encoded(&ForgetLoaded { users: &pairs }),
        encoded(&WalkUsers { tenant: "t", cursor: "0", server: "", wanted: 200 }),
        encoded(&Ping),
        encoded(&ForgetHead { tenant: "t", conversation: "c" }),
        encoded(&Heads { tenant: "t", heads: vec![&row, &other] }),
        encoded(&Previews { tenant: "t", rows: &[row_of("c", 3), row_of("d", 4)] }),
        encoded(&Dataset { remembered: String::new() }),
        encoded(&MoveClocks {
            tenant: "t",
            moves: &[
                ClockMove {
                    conversation: "c".into(),
                    counter: Some(4),
                    fresh: false,
                    announce: Some(9),
                    logged: true,
                    also: Some(10),
                },
                ClockMove {
                    conversation: "d".into(),
                    counter: None,
                    fresh: false,
                    announce: None,
                    logged: false,
                    also: None,
                },
            ],
        }),
        encoded(&GroupLogs {
            conversations: &crate::keys::conversations_prefix("t"),
            wanted: &[
                WantedLog { conversation: "c".into(), after: 3 },
                WantedLog { conversation: "d".into(), after: 0 },
            ],
        }),
    ]
    .into_iter()
    .collect()
}

#[test]
fn every_encoder_matches_its_scripts_header() {
    let samples = sample_calls();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".lua") && name != "prelude.lua")
        .collect();
    files.sort();
    for file in &files {
        let call = samples.get(file.as_str()).unwrap_or_else(|| panic!("no sample call of {file}"));
        let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
        assert_eq!(&header(&text), call.names(), "{file}: the Rust encoder and the Lua header differ");
    }
    assert_eq!(files.len(), samples.len(), "a sample names a script that does not exist");
}

#[test]
fn the_prelude_names_the_users_and_conversations_keys_as_keys_rs_does() {
    let prelude = crate::script::PRELUDE;
    for (list, names_in_rust) in [("USER_KEYS", USER_KEYS.to_vec()), ("CONVERSATION_KEYS", CONVERSATION_KEYS.to_vec())]
    {
        let line = prelude.lines().find(|l| l.starts_with(&format!("local {list} "))).unwrap();
        assert_eq!(names(Some(&line[line.find('{').unwrap()..])), names_in_rust, "{list}");
    }
}

#[test]
fn a_request_for_logs_is_marked_alike_in_lua_and_rust() {
    let line = crate::script::PRELUDE.lines().find(|l| l.starts_with("local LOGS_WANTED = ")).unwrap();
    assert_eq!(line, format!("local LOGS_WANTED = '{LOGS_WANTED}'"));
}

#[test]
fn slots_are_computed_as_redis_cluster_does() {
    // Values from Redis's cluster specification and CLUSTER KEYSLOT.
    assert_eq!(slot("123456789"), 0x31C3 & 0x3FFF);
    assert_eq!(slot("foo"), 12182);
    assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
    assert_ne!(slot("foo{}{bar}"), slot("bar"), "an empty tag: the whole key");
    assert_eq!(slot("foo{{bar}}zap"), slot("{bar"));
    assert_eq!(slot("foo{bar}{zap}"), slot("bar"));
}

/// Redis Cluster runs a script only if all its keys hash to one slot. The
/// scripts that act for one user or one conversation do; the scripts that act
/// for many members or many conversations at once name keys of many slots,
/// and a cluster client must send them to each slot's node in groups (which
/// this list is for: a script that starts to span slots shows up here).
#[test]
fn the_scripts_that_span_slots_are_known() {
    let mut one_slot = Vec::new();
    let mut many_slots = Vec::new();
    for (file, call) in sample_calls() {
        let slots: std::collections::BTreeSet<u16> = call.keys.iter().map(|key| slot(key)).collect();
        match slots.len() {
            0 | 1 => one_slot.push(file),
            _ => many_slots.push(file),
        }
    }
    assert_eq!(
        one_slot,
        [
            "dataset.lua",
            "forget_head.lua",
            "forget_joiners.lua",
            "forget_unannounced.lua",
            "joining.lua",
            "list.lua",
            "mark_read.lua",
            "ping.lua",
            "set_flag.lua",
            "walk_users.lua"
        ]
    );
    assert_eq!(
        many_slots,
        [
            "adopt.lua",
            "badge.lua",
            "category_inventory.lua",
            "clear_category.lua",
            "forget_loaded.lua",
            "group_logs.lua",
            "heads.lua",
            "join.lua",
            "leave.lua",
            "move_clocks.lua",
            "previews.lua",
            "rebuild.lua",
            "recall.lua",
            "touch.lua",
            "versions.lua"
        ]
    );
    // One user's keys, and one conversation's, each share a slot.
    let user = crate::keys::UserKeys::new("acme", "u:1");
    let user_slots: std::collections::BTreeSet<u16> = USER_KEYS.iter().map(|name| slot(&user.key(name))).collect();
    assert_eq!(user_slots.len(), 1);
    let conversation = crate::keys::ConversationKeys::new("acme", "c:1");
    let conversation_slots: std::collections::BTreeSet<u16> =
        CONVERSATION_KEYS.iter().map(|name| slot(&conversation.key(name))).collect();
    assert_eq!(conversation_slots.len(), 1);
}

/// A Lua state with the globals a script's prelude names (empty `redis`
/// and `cjson`; a test puts in what it calls).
fn bare_lua() -> mlua::Lua {
    let lua = mlua::Lua::new();
    lua.load("redis = {}\ncjson = {}").exec().unwrap();
    lua
}

/// The prelude, then script `file`'s `declare` header, returning what
/// `declare` returns.
fn declare_only(file: &str) -> String {
    let text = std::fs::read_to_string(format!("{}/src/scripts/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let start = text.find("declare {").unwrap() + "declare ".len();
    format!("{}\nreturn declare {}", crate::script::PRELUDE, balanced(&text[start..]))
}

/// On Redis Cluster a call is sent in single-slot parts. Every part of every
/// sample call is one slot, every item goes in exactly one part, the fixed
/// keys in exactly one; and `declare` (run in Lua) takes every part: it
/// names the part's items, and gives no fixed keys to a part without them.
#[test]
fn every_call_splits_into_single_slot_parts_its_script_takes() {
    let lua = bare_lua();
    let mut split = Vec::new();
    for (file, call) in sample_calls() {
        let parts = call.parts().unwrap_or_else(|e| panic!("{file}: {e:?}"));
        let script = declare_only(file);
        let fixed_keys = call.names().keys.len();
        let mut items: Vec<usize> = Vec::new();
        let mut with_fixed = 0;
        for part in &parts {
            let slots: std::collections::BTreeSet<u16> = part.call.keys.iter().map(|k| slot(k)).collect();
            assert!(slots.len() <= 1, "{file}: a part spans slots");
            assert_eq!(slots.iter().next().copied(), part.slot, "{file}");
            items.extend(&part.items);
            with_fixed += usize::from(part.with_fixed_keys);
            let globals = lua.globals();
            globals.set("KEYS", part.call.keys.clone()).unwrap();
            let args: Vec<mlua::String> = part.call.args.iter().map(|a| lua.create_string(a).unwrap()).collect();
            globals.set("ARGV", args).unwrap();
            let (keys, _, named): (mlua::Value, mlua::Value, mlua::Table) =
                lua.load(&script).eval().unwrap_or_else(|e| panic!("{file}: declare refuses a part: {e}"));
            assert_eq!(named.raw_len(), part.items.len(), "{file}: items of a part");
            let has_keys = !matches!(keys, mlua::Value::Nil);
            assert_eq!(has_keys, fixed_keys == 0 || part.with_fixed_keys, "{file}: fixed keys of a part");
        }
        items.sort();
        let count = call.names().each_keys.len().max(1);
        let expected = if call.names().each_keys.is_empty() { 0 } else { (call.keys.len() - fixed_keys) / count };
        assert_eq!(items, (0..expected).collect::<Vec<_>>(), "{file}: every item in exactly one part");
        let has_fixed = fixed_keys > 0 || call.names().each_keys.is_empty();
        assert_eq!(with_fixed, usize::from(has_fixed), "{file}: the fixed keys in exactly one part");
        if parts.len() > 1 {
            split.push(file);
        }
    }
    assert_eq!(split.len(), 15, "the scripts that span slots are split: {split:?}");
}

/// On Redis Cluster the parts of the slots one node serves go as one call,
/// without keys. Run in Lua, `declare` takes such a call as the parts it
/// joins: it names all their items, and the fixed keys if one of them had
/// them; every key is looked at before it returns, and a key the node does
/// not serve stops the call with ELSEWHERE. Split, the call gives back those
/// parts.
#[test]
fn a_call_joining_one_nodes_parts_declares_their_items_and_stops_where_a_key_is_elsewhere() {
    let lua = bare_lua();
    let (mut joined, mut apart) = (Vec::new(), 0);
    for (file, call) in sample_calls() {
        let script = declare_only(file);
        let fixed_keys = call.names().keys.len();
        let by_slot = call.parts().unwrap();
        // One node serves every slot; or one the fixed keys' slot and
        // another every other slot (a joined part without the fixed keys).
        let one_node = call.parts_together(|_| Some(false)).unwrap();
        let fixed = by_slot.iter().find(|p| p.with_fixed_keys).and_then(|p| p.slot);
        let two_nodes = call.parts_together(|slot| Some(Some(slot) == fixed)).unwrap();
        for part in one_node.into_iter().chain(two_nodes) {
            if !part.is_joined() {
                continue;
            }
            joined.push(file);
            apart += usize::from(fixed_keys > 0 && !part.with_fixed_keys);
            let globals = lua.globals();
            globals.set("KEYS", Vec::<String>::new()).unwrap();
            let args: Vec<mlua::String> = part.joined_args().iter().map(|a| lua.create_string(a).unwrap()).collect();
            globals.set("ARGV", args).unwrap();
            lua.load("looked = {}\nredis.pcall = function(_, ...) for _, k in ipairs({...}) do looked[#looked + 1] = k end return 1 end")
                .exec()
                .unwrap();
            let (keys, _, named): (mlua::Value, mlua::Value, mlua::Table) =
                lua.load(&script).eval().unwrap_or_else(|e| panic!("{file}: declare refuses a joined part: {e}"));
            assert_eq!(named.raw_len(), part.items.len(), "{file}: items of a joined part");
            let has_keys = !matches!(keys, mlua::Value::Nil);
            assert_eq!(has_keys, fixed_keys == 0 || part.with_fixed_keys, "{file}: fixed keys of a joined part");
            let looked: Vec<String> = globals.get("looked").unwrap();
            assert_eq!(looked, part.call.keys, "{file}: every key looked at");
            lua.load("redis.pcall = function() return {err = 'ERR Script attempted to access a non local key'} end")
                .exec()
                .unwrap();
            globals.set("SCRIPT", script.as_str()).unwrap();
            let refused: String = lua
                .load("local ran, refused = pcall((loadstring or load)(SCRIPT))\nreturn ran and 'ran' or refused.err")
                .eval()
                .unwrap();
            assert!(refused.starts_with(crate::script::ELSEWHERE), "{file}: {refused}");
            for piece in part.split() {
                let same = by_slot.iter().find(|p| p.slot == piece.slot).unwrap();
                assert_eq!(
                    (&piece.items, &piece.call.keys, &piece.call.args, piece.with_fixed_keys),
                    (&same.items, &same.call.keys, &same.call.args, same.with_fixed_keys),
                    "{file}: a piece of a joined part"
                );
            }
        }
    }
    assert!(apart > 0, "no joined part came without the fixed keys");
    joined.dedup();
    assert_eq!(joined.len(), 15, "every call that spans slots joins its parts: {joined:?}");
}

/// The names the prelude defines at its top level in `text` (`local
/// function f`, `local a, b = ...`).
fn top_level_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("local ") else { continue };
        let rest = rest.strip_prefix("function ").unwrap_or(rest);
        let declared = rest.split(['=', '(']).next().unwrap_or("");
        names.extend(declared.split(',').map(|n| n.trim().to_string()).filter(|n| !n.is_empty()));
    }
    names
}

/// Whether the code of `text` (comments aside) uses `name` as a whole word.
fn uses(text: &str, name: &str) -> bool {
    let code: String = text.lines().map(|line| line.split("--").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    code.match_indices(name).any(|(at, _)| {
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !word(code[..at].chars().next_back()) && !word(code[at + name.len()..].chars().next())
    })
}

#[test]
fn a_script_on_the_preludes_base_uses_nothing_defined_after_it() {
    let base = crate::script::base_prelude();
    let rest = &crate::script::PRELUDE[base.len()..];
    assert!(!rest.is_empty(), "the prelude has no BASE END line");
    let later = top_level_names(rest);
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts");
    let mut on_base = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let source = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for (at, _) in source.match_indices("lua!(base \"") {
            let file = &source[at + 11..];
            on_base.push(file[..file.find('"').unwrap()].to_string());
        }
    }
    on_base.sort();
    assert_eq!(
        on_base,
        ["forget_joiners.lua", "forget_unannounced.lua", "previews.lua"],
        "the scripts on the base, as this test last knew them"
    );
    let texts = on_base.iter().map(|file| (file.clone(), std::fs::read_to_string(format!("{dir}/{file}")).unwrap()));
    for (file, text) in texts.chain([("the base itself".to_string(), base.to_string())]) {
        for name in &later {
            assert!(!uses(&text, name), "{file} uses {name}, which the prelude defines after its base");
        }
    }
}
