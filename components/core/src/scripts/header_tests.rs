//! Every script's Rust encoder against its Lua header: the names and the
//! order of keys and arguments must be the same on both sides.

use std::collections::BTreeMap;

use super::*;
use crate::bindings::unread::core::types::ConversationFlag;
use crate::keys::{CONVERSATION_KEYS, USER_KEYS};
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

fn encoded(script: &impl Script) -> (&'static str, Names) {
    let mut call = Call::default();
    script.encode(&mut call);
    (script_file::<_>(script), call.names().clone())
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
fn samples() -> BTreeMap<&'static str, Names> {
    let users = users();
    let members = || Members { tenant: "t", users: &users };
    let row = TruthRow::sample();
    let cursor = ListCursor { section: 0, score: 5, conversation: "c".into() };
    let flag = ConversationFlag::Muted(true);
    let pairs = vec![("t".to_string(), "u1".to_string())];
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
        }),
        encoded(&MarkRead {
            tenant: "t",
            user: "u",
            conversation: "c",
            seq: 1,
            ahead: 10,
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
        }),
        encoded(&Badge { tenant: "t", user: "u", require_loaded: false }),
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
            max_kept: 1000,
            require_loaded: false,
            members: members(),
        }),
        encoded(&Join { conversation: "c", seq: 1, max_conversations: 100, max_kept: 1000, members: members() }),
        encoded(&Leave {
            conversation: "c",
            max_conversations: 100,
            max_kept: 1000,
            require_loaded: false,
            members: members(),
        }),
        encoded(&CategoryInventory { category: "chat", members: members() }),
        encoded(&ClearCategory {
            tenant: "t",
            category: "chat",
            max_kept: 1000,
            clearings: vec![Clearing { user: "u", conversation: "c", seq: 3 }],
        }),
        encoded(&Rebuild {
            tenant: "t",
            users: vec![TruthUser { user: "u", version: "3", partial: false, rows: vec![&row] }],
            load_empty: false,
        }),
        encoded(&Versions { tenant: "t", users: &users }),
        encoded(&ForgetLoaded { users: &pairs }),
        encoded(&WalkUsers { tenant: "t", cursor: "0", wanted: 200 }),
        encoded(&Ping),
        encoded(&ForgetHead { tenant: "t", conversation: "c" }),
        encoded(&Heads { tenant: "t", heads: vec![&row] }),
        encoded(&Previews { tenant: "t", rows: &[row_of("c", 3)] }),
        encoded(&Dataset { remembered: String::new() }),
    ]
    .into_iter()
    .collect()
}

#[test]
fn every_encoder_matches_its_scripts_header() {
    let samples = samples();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".lua") && name != "prelude.lua")
        .collect();
    files.sort();
    for file in &files {
        let names = samples.get(file.as_str()).unwrap_or_else(|| panic!("no sample call of {file}"));
        let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
        assert_eq!(&header(&text), names, "{file}: the Rust encoder and the Lua header differ");
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
