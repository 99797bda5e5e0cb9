package redis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"
)

// The scripts of the data plane (acquire, deltas, lease endings) run as
// Redis functions (FCALL) of one library, loaded once per server, rather
// than as scripts (EVALSHA): a script's helper functions are made anew on
// every call, a library's once, which takes about 2 µs off every acquire's
// time in Redis (docs/redis.md, "Functions"). The library's name and its
// functions' names carry a hash of its code, so that processes of
// different versions sharing one Redis each call their own. A server that
// refuses functions (FUNCTION LOAD not permitted, or not a command) gets
// the same scripts by EVALSHA.

// luaBucketLib is the library of the data plane's scripts: their numbers,
// bucket reads and writes, deltas and audit events.
const luaBucketLib = luaNum + luaLimits + luaDeltaFns + luaAppendEvent + luaConsumeFns

// A bucketScript is one script of the data plane, its KEYS and ARGV as in
// EVAL.
type bucketScript struct {
	name string // its name in the library
	body string // its text, after luaBucketLib
	fn   string // its function's name (newLibrary)
	lua  *rueidis.Lua
}

// The data plane's scripts, and their library.
var (
	consumeScript  = &bucketScript{name: "consume", body: luaConsume}
	deltasScript   = &bucketScript{name: "deltas", body: luaDeltas}
	endLeaseScript = &bucketScript{name: "end_lease", body: luaEndLease}
	bucketLib      = newLibrary(consumeScript, deltasScript, endLeaseScript)
)

// A library is the code that FUNCTION LOAD takes, and the name it loads.
type library struct{ name, code string }

// newLibrary makes the library of scripts, named after a hash of its
// code, and sets each script's function name and its EVALSHA fallback.
func newLibrary(scripts ...*bucketScript) library {
	code := func(prefix string) string {
		var b strings.Builder
		b.WriteString(luaBucketLib)
		for _, sc := range scripts {
			fmt.Fprintf(&b, "redis.register_function('%s%s', function(KEYS, ARGV)\n%s\nend)\n", prefix, sc.name, sc.body)
		}
		return b.String()
	}
	sum := sha1.Sum([]byte(code("")))
	name := "tollgate_" + hex.EncodeToString(sum[:8])
	for _, sc := range scripts {
		sc.fn = name + "_" + sc.name
		sc.lua = rueidis.NewLuaScript(luaBucketLib + sc.body)
	}
	return library{name: name, code: "#!lua name=" + name + "\n" + code(name+"_")}
}

// run calls script sc with keys and args: as a function of the library,
// loading the library first where the server does not have it, or by
// EVALSHA where the server refuses functions.
func (s *Store) run(ctx context.Context, sc *bucketScript, keys, args []string) rueidis.RedisResult {
	if !s.evalOnly.Load() {
		res := s.fcall(ctx, sc, keys, args)
		switch err := res.Error(); {
		case err == nil:
			return res
		case refusesFunctions(err):
			s.evalOnly.Store(true)
		case !isNoFunction(err):
			return res
		case s.loadLibrary(ctx) != nil:
			return res
		case !s.evalOnly.Load():
			return s.fcall(ctx, sc, keys, args)
		}
	}
	return sc.lua.Exec(ctx, s.c, keys, args)
}

func (s *Store) fcall(ctx context.Context, sc *bucketScript, keys, args []string) rueidis.RedisResult {
	return s.c.Do(ctx, s.c.B().Fcall().Function(sc.fn).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
}

// loadLibrary loads the library into every node of the client. A node
// that is a replica refuses it (the primary's replicates); when every
// node refuses functions themselves, the Store uses EVALSHA from then on.
func (s *Store) loadLibrary(ctx context.Context) error {
	loaded, refused := 0, 0
	var last error
	for _, node := range s.c.Nodes() {
		err := node.Do(ctx, node.B().FunctionLoad().Replace().FunctionCode(bucketLib.code).Build()).Error()
		switch {
		case err == nil:
			loaded++
		case refusesFunctions(err):
			refused++
			last = err
		default:
			last = err
		}
	}
	switch {
	case loaded > 0:
		return nil
	case refused > 0:
		s.evalOnly.Store(true)
		return nil
	}
	return fmt.Errorf("redis: load the functions: %w", last)
}

// isNoFunction reports whether err is a server's answer that it has no
// such function (its library is not loaded, or was flushed).
func isNoFunction(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && strings.Contains(re.Error(), "Function not found")
}

// refusesFunctions reports whether err is a server refusing functions:
// not permitted to this user (FUNCTION LOAD or FCALL), or an unknown
// command (before Redis 7).
func refusesFunctions(err error) bool {
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "unknown command")
}
