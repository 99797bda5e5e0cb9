package redis

// What the control-plane half of the contract shares (configs, entities,
// namespaces, API keys, audit events, the change generation): the codes
// its scripts answer, the Lua helpers every one of them begins with, how a
// change raises the generation, and reading a page of an index with the
// values it names.

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// A control-plane script answers codeOK when it made its change, or the
// code of the condition that refused it, in which case it wrote nothing:
// every script checks all of its conditions before its first write.
const (
	codeOK = iota
	codeEntityExists
	codeEntityNotFound
	codeNotFound
	codeKeyExists
	codeKeyNotFound
	codeNamespaceExists
	codeNamespaceNotFound
	// codeCycle: the new parent is the entity or one of its descendants.
	codeCycle
	// codeTooDeep: the new parent's chain of ancestors is longer than
	// store.MaxAncestry.
	codeTooDeep
	// codeChanged: the record is no longer the one the caller read
	// before it computed the new one; the caller reads it again.
	codeChanged
)

// codeVersionMismatch plus the stored record's version (0: none) is the
// answer of a script whose precondition (store.Precondition) does not
// hold; it lies above every other code.
const codeVersionMismatch = 1 << 20

// luaCodeNames are the codes' names in the scripts.
var luaCodeNames = [...]string{
	codeOK:                "OK",
	codeEntityExists:      "ENTITY_EXISTS",
	codeEntityNotFound:    "ENTITY_NOT_FOUND",
	codeNotFound:          "NOT_FOUND",
	codeKeyExists:         "KEY_EXISTS",
	codeKeyNotFound:       "KEY_NOT_FOUND",
	codeNamespaceExists:   "NAMESPACE_EXISTS",
	codeNamespaceNotFound: "NAMESPACE_NOT_FOUND",
	codeCycle:             "CYCLE",
	codeTooDeep:           "TOO_DEEP",
	codeChanged:           "CHANGED",
}

// luaVersion is what the scripts that check a store.Precondition share:
// VERSION_MISMATCH (codeVersionMismatch), version_of, the version of a
// stored config or entity (JSON; one stored before versions were kept is
// at 1), and version_refusal, which returns the code refusing a
// precondition expect (” none, else the version) for a record at version
// have, or nil where it holds.
var luaVersion = "local VERSION_MISMATCH = " + strconv.Itoa(codeVersionMismatch) + `
local function version_of(js)
  if not js then return 0 end
  local v = cjson.decode(js).version
  if type(v) ~= 'number' or v < 1 then return 1 end
  return v
end
local function version_refusal(expect, have)
  if expect ~= '' and tonumber(expect) ~= have then return VERSION_MISMATCH + have end
  return nil
end
`

// preconditionArg is a script's argument carrying pre: ” for none, else
// the version expected.
func preconditionArg(pre []store.Precondition) string {
	if len(pre) == 0 {
		return ""
	}
	return strconv.FormatInt(pre[0].Version, 10)
}

// versionRefusal returns the error of a script's code refusing the
// precondition pre (codeVersionMismatch and up), or refusal(code).
func versionRefusal(code int64, pre []store.Precondition) error {
	if code >= codeVersionMismatch && len(pre) > 0 {
		return model.VersionMismatch(pre[0].Version, code-codeVersionMismatch)
	}
	return refusal(code)
}

// luaControl begins every control-plane script: the codes by name (made
// from the constants above, so that Go and Lua cannot disagree) and
// raise_generation.
var luaControl = luaCodes() + luaRaiseGeneration

// luaCodes declares luaCodeNames as Lua locals holding their codes.
func luaCodes() string {
	s := ""
	for i, name := range luaCodeNames {
		s += "local " + name + " = " + strconv.Itoa(i) + "\n"
	}
	return s
}

// luaRaiseGeneration raises the change generation from a script that has
// n keys of its own: on a single server (Store.change) the generation's
// key follows them in KEYS; on a Cluster it is not there, and Store.change
// raises it after the script.
const luaRaiseGeneration = `
local function raise_generation(n)
  if KEYS[n + 1] then redis.call('INCR', KEYS[n + 1]) end
end
`

// errGenerationAfterChange wraps the error of raising the generation on a
// Cluster after a change was made.
var errGenerationAfterChange = errors.New("redis: the change is made, but raising the change generation failed")

// cluster reports whether the client talks to a Redis Cluster, whose
// scripts may only touch keys of one hash slot.
func (s *Store) cluster() bool { return s.c.Mode() == rueidis.ClientModeCluster }

// change runs a control-plane script that makes one change (with its audit
// event, if it has one) and returns the script's code. keys are the
// script's own; on a single server the generation's key is added after
// them, and the script raises it (raise_generation) in the same atomic
// step as the change.
//
// The generation's key has a hash tag of its own, and a Cluster refuses a
// script whose keys lie in different slots: there change raises it with a
// call of its own right after the script made the change, before it
// returns, which is what store.Changes asks. A crash in between leaves a
// change that the other processes see only at the next change's raise.
func (s *Store) change(ctx context.Context, script *rueidis.Lua, keys, args []string) (int64, error) {
	if s.cluster() {
		code, err := s.exec(ctx, script, keys, args)
		if err != nil || code != codeOK {
			return code, err
		}
		return code, s.raiseGeneration(ctx)
	}
	return s.exec(ctx, script, append(keys[:len(keys):len(keys)], s.keys.generation()), args)
}

// exec runs a control-plane script and returns its code.
func (s *Store) exec(ctx context.Context, script *rueidis.Lua, keys, args []string) (int64, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	return script.Exec(ctx, s.c, keys, args).AsInt64()
}

// raiseGeneration raises the generation with a call of its own, on a
// Cluster after a change made by a script.
func (s *Store) raiseGeneration(ctx context.Context) error {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	if err := s.c.Do(ctx, s.c.B().Incr().Key(s.keys.generation()).Build()).Error(); err != nil {
		return fmt.Errorf("%w: %w", errGenerationAfterChange, err)
	}
	return nil
}

// refusal returns the error of a script's refusal code, as the other
// backends return it, or nil for codeOK. Codes that need the call's
// arguments to be told (codeCycle, codeTooDeep) are the caller's.
func refusal(code int64) error {
	switch code {
	case codeOK:
		return nil
	case codeEntityExists:
		return model.ErrEntityExists
	case codeEntityNotFound:
		return model.ErrEntityNotFound
	case codeNotFound:
		return model.ErrNotFound
	case codeKeyExists:
		return model.ErrKeyExists
	case codeKeyNotFound:
		return model.ErrKeyNotFound
	case codeNamespaceExists:
		return model.ErrNamespaceExists
	case codeNamespaceNotFound:
		return model.ErrNamespaceNotFound
	}
	return fmt.Errorf("redis: a script answered the unexpected code %d", code)
}

// maxChangedRetries bounds how often a read-then-write change (a record
// compared and replaced, codeChanged) reads again because another process
// changed the record in between.
const maxChangedRetries = 16

// errBusy is returned when maxChangedRetries did not suffice.
var errBusy = errors.New("redis: the record kept changing; try again")

// luaRangeGet reads a page of a score-0 sorted set whose members name
// string keys (ARGV[1] .. member), and those keys' values, in one step,
// so that a page never misses a member deleted between two calls.
// KEYS[1]: the sorted set. ARGV: 1 the keys' prefix, 2 and 3 the
// lexicographic range, 4 at most this many members (negative: all).
// Answers member, value, member, value...; writes nothing.
const luaRangeGet = `
local out = {}
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], ARGV[2], ARGV[3], 'BYLEX', 'LIMIT', 0, ARGV[4])) do
  local v = redis.call('GET', ARGV[1] .. m)
  if v then
    out[#out + 1] = m
    out[#out + 1] = v
  end
end
return out
`

var rangeGetScript = rueidis.NewLuaScriptReadOnly(luaRangeGet)

// indexedValue is one member of an index read by rangeGet, with its value.
type indexedValue struct {
	name, value string
}

// rangeGet returns up to limit (negative: all) members of the sorted set
// index in the lexicographic range [min, max] (ZRANGE BYLEX syntax) with
// the values of the keys prefix + member.
func (s *Store) rangeGet(ctx context.Context, index, prefix, min, max string, limit int) ([]indexedValue, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	vals, err := rangeGetScript.Exec(ctx, s.c, []string{index}, []string{prefix, min, max, strconv.Itoa(limit)}).AsStrSlice()
	if err != nil {
		return nil, err
	}
	out := make([]indexedValue, 0, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		out = append(out, indexedValue{vals[i], vals[i+1]})
	}
	return out, nil
}

// lexAfter is the ZRANGE BYLEX lower bound of the members greater than
// after ("" : all of them).
func lexAfter(after string) string {
	if after == "" {
		return "-"
	}
	return "(" + after
}

// getValues returns the values of keys (one MGET: the keys share a hash
// slot), "" and false where a key is missing.
func (s *Store) getValues(ctx context.Context, keys []string) ([]string, []bool, error) {
	vals, found := make([]string, len(keys)), make([]bool, len(keys))
	if len(keys) == 0 {
		return vals, found, nil
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	msgs, err := s.c.Do(ctx, s.c.B().Mget().Key(keys...).Build()).ToArray()
	if err != nil {
		return nil, nil, err
	}
	for i := range msgs {
		if i >= len(keys) {
			break
		}
		v, err := msgs[i].ToString()
		switch {
		case isNil(err):
		case err != nil:
			return nil, nil, err
		default:
			vals[i], found[i] = v, true
		}
	}
	return vals, found, nil
}

// getValue returns the value of key, or errNotFound.
func (s *Store) getValue(ctx context.Context, key string) (string, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	v, err := s.c.Do(ctx, s.c.B().Get().Key(key).Build()).ToString()
	if isNil(err) {
		return "", errNotFound
	}
	return v, err
}

// encoded returns a record's stored form (package codec) as a string.
func encoded(b []byte, err error) (string, error) {
	if err != nil {
		return "", fmt.Errorf("redis: %w", err)
	}
	return string(b), nil
}

// decoded returns a record read back (package codec), its error named as
// the backend's.
func decoded[T any](v T, err error) (T, error) {
	if err != nil {
		return v, fmt.Errorf("redis: %w", err)
	}
	return v, nil
}
