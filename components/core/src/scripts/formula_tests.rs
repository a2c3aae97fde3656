//! Two formulas exist twice. The counting formula: `counted` in
//! `prelude.lua` (what Redis holds) and `Counts::counted` in `state.rs`
//! (answers from the SQL truth); this runs both on the same states, through
//! the state text the scripts store, so the two can never disagree. And the
//! names of a conversation's keys: `conversation_keys` in `prelude.lua` (for
//! a membership record, which holds only a number) and `ConversationKeys`,
//! and of a conversation's clock: `clock_key` and `keys::clock`. And how
//! far a membership record says its member caught up: `membership_applied`
//! in both, the Rust one reading what `take_logs` answers on a cluster. And
//! a head's last message and preview: `decode_head` and `head_message`, the
//! Rust one reading heads a cluster's list page gets with plain `GET`s. And
//! which rows' heads need no renewal yet: `head_is_young` in both.

use mlua::{Function, Lua, Table};

use crate::script::PRELUDE;
use crate::state::Counts;

/// The prelude's functions, in a Lua 5.1 (Redis's Lua) without Redis; the
/// interpreter lives as long as the table is used.
fn prelude() -> (Lua, Table) {
    let lua = Lua::new();
    let chunk = format!(
        "KEYS, ARGV = {{}}, {{}}\nredis = {{}}\ncjson = {{}}\n{PRELUDE}\n\
         return {{counted = counted, decode_state = decode_state, encode_state = encode_state, \
         take_logs = take_logs, conversation_keys = conversation_keys, \
         use_clocks = use_clocks, clock_key = clock_key, membership_applied = membership_applied, \
         decode_head = decode_head, head_is_young = head_is_young, with_standing = with_standing}}"
    );
    let functions = lua.load(chunk).eval().expect("prelude.lua loads");
    (lua, functions)
}

#[test]
fn lua_and_rust_count_every_state_alike() {
    let (_lua, functions) = prelude();
    let decode: Function = functions.get("decode_state").unwrap();
    let counted: Function = functions.get("counted").unwrap();
    let mut checked = 0;
    for last in 0..7u64 {
        for read in 0..9u64 {
            for recalled in 0..4u64 {
                for mentions in 0..3u64 {
                    for flags in ["", "m", "u", "mu", "kpu", "kmp"] {
                        let text = format!("{last}:{read}:{mentions}:{recalled}:{flags}:chat:");
                        let state: Table = decode.call(text.clone()).unwrap();
                        let lua: Table = counted.call(state).unwrap();
                        let rust = Counts {
                            last,
                            read,
                            mentions,
                            recalled,
                            muted: flags.contains('m'),
                            marked_unread: flags.contains('u'),
                        }
                        .counted();
                        let lua = (
                            lua.get::<u64>("unread").unwrap(),
                            lua.get::<u64>("badge").unwrap(),
                            lua.get::<u64>("muted").unwrap(),
                            lua.get::<u64>("mentions").unwrap(),
                        );
                        assert_eq!(lua, (rust.unread, rust.badge, rust.muted, rust.mentions), "{text}");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 7 * 9 * 4 * 3 * 6);
}

#[test]
fn states_read_back_as_written() {
    let (_lua, functions) = prelude();
    let decode: Function = functions.get("decode_state").unwrap();
    let encode: Function = functions.get("encode_state").unwrap();
    for text in ["17:14:1:0:kmu:chat:", "0:5:0:0:::", "9:0:0:2:x:system:1764460800123009"] {
        let state: Table = decode.call(text).unwrap();
        assert_eq!(encode.call::<String>(state).unwrap(), text);
    }
    // A state an earlier layout wrote ends with its preview: kept as it is.
    let old = "17:14:1:0:kmu:chat::{\"text\":\"a:b\"}";
    let state: Table = decode.call(old).unwrap();
    assert_eq!(state.get::<String>("legacy").unwrap(), "{\"text\":\"a:b\"}");
    assert_eq!(encode.call::<String>(state).unwrap(), old);
    // Anything else reads as an empty conversation.
    for garbage in ["garbage", "1:2:3:4::chat:5x", "1:2:3:4::chat"] {
        let state: Table = decode.call(garbage).unwrap();
        assert_eq!(encode.call::<String>(state).unwrap(), "0:0:0:0:::", "{garbage}");
    }
}

#[test]
fn lua_names_a_conversations_keys_as_rust_does() {
    let (lua, functions) = prelude();
    let take_logs: Function = functions.get("take_logs").unwrap();
    let keys: Function = functions.get("conversation_keys").unwrap();
    let ids =
        ["c1", "a:b", "}{", "*?[]\\", "100%", "x y", "u@host|+#=/.", "é-ü_", "tab\there", "\u{1F600}", "-", "%41"];
    for tenant in ["acme", "t:1", "{t}"] {
        let args = lua.create_table().unwrap();
        args.set("logs", "").unwrap();
        args.set("conversations", crate::keys::conversations_prefix(tenant)).unwrap();
        let () = take_logs.call((args, lua.create_table().unwrap())).unwrap();
        for id in ids {
            let (head, group, earlier): (String, String, String) = keys.call(id).unwrap();
            let rust = crate::keys::ConversationKeys::new(tenant, id);
            let names = (rust.key("head"), rust.key("group"), rust.key("earlier"));
            assert_eq!((head, group, earlier), names, "tenant {tenant:?}, conversation {id:?}");
        }
    }
}

#[test]
fn lua_names_a_conversations_clock_as_rust_does() {
    let (_lua, functions) = prelude();
    let use_clocks: Function = functions.get("use_clocks").unwrap();
    let clock_key: Function = functions.get("clock_key").unwrap();
    let ids = ["c1", "g17", "a:b", "}{", "100%", "x y", "é-ü_", "\u{1F600}", "", "a", "abcde", "abcdefg", "large199"];
    let long = "a-much-longer-conversation-id-0123456789".repeat(3);
    // Every length up to 40 bytes, high bytes among them, so that each way
    // the Lua sum takes a call's bytes (twelve, six, the last few) is held
    // to Rust's byte by byte.
    let varied = "9f3c2a7e-\u{ff}b41-4d0e-8a1c-\u{7f}5e6d4c3b2a10zz".as_bytes();
    let prefixes: Vec<String> = (0..=40).map(|n| String::from_utf8_lossy(&varied[..n]).into_owned()).collect();
    let ids = ids.iter().copied().chain([long.as_str()]).chain(prefixes.iter().map(String::as_str));
    for tenant in ["acme", "t:1"] {
        let () = use_clocks.call(crate::keys::clocks_prefix(tenant)).unwrap();
        for id in ids.clone() {
            let lua: String = clock_key.call(id).unwrap();
            assert_eq!(lua, crate::keys::clock(tenant, id), "tenant {tenant:?}, conversation {id:?}");
        }
    }
}

#[test]
fn lua_and_rust_read_how_far_a_membership_record_says_alike() {
    use crate::scripts::group_logs::{WantedLog, logs_wanted, membership_applied};
    use spin_sdk::redis::RedisResult;

    let (lua, functions) = prelude();
    let applied: Function = functions.get("membership_applied").unwrap();
    // Today's records, one an earlier layout wrote (with its keys' names),
    // and texts that are no record.
    let records = ["0", "7", "123456789012345", "12\nun:v2:head:{acme:g}\nun:v2:head:{acme:g}:group", "", "x", "x\n7"];
    for record in records {
        let lua: Option<u64> = applied.call(record).unwrap();
        assert_eq!(membership_applied(record), lua, "{record:?}");
    }
    // What one user's script answers on a cluster: its records as stored,
    // which the client reads as the script would.
    let take_logs: Function = functions.get("take_logs").unwrap();
    // A new table each call, as Redis gives (take_logs writes into it).
    let hgetall = lua
        .create_function(move |lua, (_command, _key): (String, String)| {
            let stored = lua.create_table()?;
            for (i, record) in records.iter().enumerate() {
                stored.set(2 * i + 1, format!("g{i}"))?;
                stored.set(2 * i + 2, *record)?;
            }
            Ok(stored)
        })
        .unwrap();
    let redis: Table = lua.globals().get("redis").unwrap();
    redis.set("call", hgetall).unwrap();
    let args = lua.create_table().unwrap();
    args.set("logs", crate::scripts::group_logs::NO_LOGS_YET).unwrap();
    args.set("conversations", "").unwrap();
    let user = lua.create_table().unwrap();
    user.set("groups", "un:v2:{acme:u1}:groups").unwrap();
    let reply: Vec<String> = take_logs.call((args.clone(), vec![user.clone()])).unwrap();
    let reply: Vec<RedisResult> = reply.into_iter().map(|v| RedisResult::Binary(v.into_bytes())).collect();
    let asked = logs_wanted(&reply).unwrap().expect("the reply asks for logs");
    assert_eq!(asked.standing, None, "nothing follows the records");
    let wanted = asked.logs;
    let expected: Vec<WantedLog> = records
        .iter()
        .enumerate()
        .filter_map(|(i, record)| {
            let after = applied.call::<Option<u64>>(*record).unwrap()?;
            Some(WantedLog { conversation: format!("g{i}"), after })
        })
        .collect();
    assert_eq!(wanted, expected);
    assert_eq!(wanted.len(), 4, "the records that are records");

    // One user's read answers after the records what it answers if none of
    // those logs moved: the client finds where that begins.
    let with_standing: Function = functions.get("with_standing").unwrap();
    let records: Vec<String> = take_logs.call((args, vec![user])).unwrap();
    let asked = records.len();
    let reply: Vec<String> = with_standing.call((records, vec!["ok", "0", "1", "chat", "3"])).unwrap();
    let reply: Vec<RedisResult> = reply.into_iter().map(|v| RedisResult::Binary(v.into_bytes())).collect();
    let standing = logs_wanted(&reply).unwrap().expect("the reply asks for logs");
    assert_eq!(standing.logs, wanted);
    assert_eq!(standing.standing, Some(asked));
    assert_eq!(reply[asked], RedisResult::Binary(b"ok".to_vec()));
    // A reply cut short inside its records is no reply.
    assert!(logs_wanted(&reply[..asked - 1]).is_err());
}

#[test]
fn lua_and_rust_read_a_heads_message_and_preview_alike() {
    use crate::scripts::previews::head_message;

    let (_lua, functions) = prelude();
    let decode: Function = functions.get("decode_head").unwrap();
    let heads = [
        "7:1764460800123007:chat:{\"text\":\"hi\"}",
        "12::chat:",
        "3:5:work_2-b:a:b:c",
        "4:5::{\"text\":\"line\\nbreak: é\"}",
        "9:5:chat:multi\nline",
        "",
        "x:5:chat:{}",
        ":5:chat:{}",
        "7:5x:chat:{}",
        "7:5:ch at:{}",
        "7:5:chat",
        "7",
    ];
    for head in heads {
        let lua: Option<Table> = decode.call(head).unwrap();
        let lua = lua.map(|h| (h.get::<u64>("seq").unwrap(), h.get::<String>("preview").unwrap()));
        let rust = head_message(head).map(|(seq, preview)| (seq, preview.to_string()));
        assert_eq!(rust, lua, "{head:?}");
    }
}

#[test]
fn lua_and_rust_tell_a_young_row_s_head_alike() {
    use crate::scripts::previews::head_is_young;
    use crate::state::{score, ts_of};

    let (_lua, functions) = prelude();
    let young: Function = functions.get("head_is_young").unwrap();
    let half = crate::HEAD_TTL * 1000 / 2;
    let now = 1_796_364_978_912u64;
    let mut seen = (0, 0);
    for ts in [0, now - half - 1, now - half, now - half + 1, now - 1, now, now + 1, now + half] {
        for seq in [0, 1, 999, 1_000, 123_456] {
            let listed = score(ts, seq);
            let lua: bool = young.call((listed as f64, now as f64, crate::HEAD_TTL as f64)).unwrap();
            let rust = head_is_young(ts_of(listed), now);
            assert_eq!(lua, rust, "ts {ts} seq {seq}");
            if rust { seen.0 += 1 } else { seen.1 += 1 }
        }
    }
    assert!(seen.0 > 0 && seen.1 > 0, "both kinds of row: {seen:?}");
}
