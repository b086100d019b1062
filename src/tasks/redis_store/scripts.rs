//! The Lua scripts that keep the store's counters exact: each runs atomically on the server,
//! so two replicas cannot both take the last free place, nor lose each other's changes.
//!
//! Key names are built by the caller from the configured prefix; scripts that reach a
//! client's counter or an owner's index build those names from the prefix too, so the
//! store needs one Redis or Valkey server (or a primary with replicas), not a cluster.

/// KEYS: count, bytes, client counter, seq, task hash, owner index, accounting hash,
/// running tasks (id → the replica running it), index of all tasks.
/// ARGV: max_tasks, max_bytes, client limit, meta, id, accounting entry, replica, the
/// record's bytes (`TaskRecord::stored_len`).
/// Returns the new task's seq, or -1 (full), -2 (bytes full), -3 (client full).
///
/// Exact: the three limits are checked and the counters raised in one step.
pub(super) const INSERT: &str = r#"
if tonumber(redis.call('GET', KEYS[1]) or '0') >= tonumber(ARGV[1]) then return -1 end
if tonumber(redis.call('GET', KEYS[2]) or '0') + tonumber(ARGV[8]) > tonumber(ARGV[2]) then return -2 end
if tonumber(redis.call('GET', KEYS[3]) or '0') >= tonumber(ARGV[3]) then return -3 end
local seq = redis.call('INCR', KEYS[4])
redis.call('HSET', KEYS[5], 'm', ARGV[4], 'seq', seq, 'ver', 1)
redis.call('INCR', KEYS[1])
redis.call('INCR', KEYS[3])
redis.call('INCRBY', KEYS[2], ARGV[8])
redis.call('ZADD', KEYS[6], seq, ARGV[5])
redis.call('ZADD', KEYS[9], seq, ARGV[5])
redis.call('HSET', KEYS[7], ARGV[5], ARGV[6])
redis.call('HSET', KEYS[8], ARGV[5], ARGV[7])
return seq
"#;

/// Compare-and-set of a record at version ARGV[1].
/// KEYS: task hash, bytes, expiry index, accounting hash, running tasks.
/// ARGV: version read, new meta, outcome ('' and ARGV[4] = '0': none), has outcome,
/// record bytes delta (`TaskRecord::stored_len`), accounting entry ('' : unchanged), expires at (ms; '' : running),
/// key expiry at (ms), id, channel, message ('' : no status change), max_store_bytes ('' : not
/// checked).
/// Returns the new version, 0 if the record changed (or went) since it was read, or -2 if it
/// grows past max_store_bytes (checked with the other replicas' writes, in one step).
pub(super) const UPDATE: &str = r#"
if redis.call('HGET', KEYS[1], 'ver') ~= ARGV[1] then return 0 end
if ARGV[12] ~= '' and tonumber(ARGV[5]) > 0
  and tonumber(redis.call('GET', KEYS[2]) or '0') + tonumber(ARGV[5]) > tonumber(ARGV[12]) then return -2 end
local ver = tonumber(ARGV[1]) + 1
redis.call('HSET', KEYS[1], 'm', ARGV[2], 'ver', ver)
if ARGV[4] == '1' then redis.call('HSET', KEYS[1], 'out', ARGV[3]) else redis.call('HDEL', KEYS[1], 'out') end
if tonumber(ARGV[5]) ~= 0 then redis.call('INCRBY', KEYS[2], ARGV[5]) end
if ARGV[6] ~= '' then redis.call('HSET', KEYS[4], ARGV[9], ARGV[6]) end
if ARGV[7] ~= '' then
  redis.call('ZADD', KEYS[3], ARGV[7], ARGV[9])
  redis.call('PEXPIREAT', KEYS[1], ARGV[8])
  redis.call('HDEL', KEYS[5], ARGV[9])
end
if ARGV[11] ~= '' then redis.call('PUBLISH', ARGV[10], (string.gsub(ARGV[11], '{ver}', ver))) end
return ver
"#;

/// Removes finished tasks whose retention ended by ARGV[1] (ms): all of them
/// (ARGV[2] = ''), or task ARGV[2] alone. At most ARGV[5] at once.
/// KEYS: expiry index, count, bytes, accounting hash.
/// ARGV: now, id or '', prefix, channel, batch.
/// Returns, per removed task, its id, meta and seq (the meta is false if the record had
/// already gone by its key's own expiry).
///
/// Exact: what a task counted (its place, its client's place, its record's bytes, from its
/// accounting entry) is given back in the step that removes it.
pub(super) const REMOVE_EXPIRED: &str = r#"
local ids
if ARGV[2] == '' then
  ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[5]))
else
  local at = redis.call('ZSCORE', KEYS[1], ARGV[2])
  if not at or tonumber(at) > tonumber(ARGV[1]) then return {} end
  ids = {ARGV[2]}
end
local out = {}
for _, id in ipairs(ids) do
  local key = ARGV[3] .. 't:' .. id
  local m = redis.call('HGET', key, 'm')
  local seq = redis.call('HGET', key, 'seq')
  local acct = redis.call('HGET', KEYS[4], id)
  if acct then
    local bytes, client, owner = string.match(acct, '^(%d+)\n([^\n]*)\n(.*)$')
    redis.call('DECR', KEYS[2])
    if tonumber(bytes) ~= 0 then redis.call('DECRBY', KEYS[3], bytes) end
    local ck = ARGV[3] .. 'client:' .. client
    if redis.call('DECR', ck) <= 0 then redis.call('DEL', ck) end
    redis.call('ZREM', ARGV[3] .. 'owner:' .. owner, id)
    redis.call('HDEL', KEYS[4], id)
  end
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', ARGV[3] .. 'all', id)
  redis.call('HDEL', ARGV[3] .. 'running', id)
  redis.call('DEL', key)
  redis.call('PUBLISH', ARGV[4], id .. '\ngone\n0\n-')
  table.insert(out, id)
  table.insert(out, m or false)
  table.insert(out, seq or '0')
end
return out
"#;
