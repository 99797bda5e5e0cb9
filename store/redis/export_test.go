package redis

import (
	"context"

	"github.com/tollgate-rl/tollgate/store"
)

// LuaWide and LuaNum are the scripts' integer libraries, for their tests.
const (
	LuaWide   = luaWide
	LuaNum    = luaNum
	LuaLimits = luaLimits
)

// LibraryName is the name of the data plane's function library.
var LibraryName = bucketLib.name

// UsesFunctions reports whether s calls the library's functions (rather
// than EVALSHA, where the server refuses functions).
func UsesFunctions(s *Store) bool { return !s.evalOnly.Load() }

// SetMaxInFlight sets how many calls a lane of s may have in flight at
// once, before s is used.
func SetMaxInFlight(s *Store, n int) { s.lanes.maxInFlight = n }

// ConsumeBatch sends reqs in one call of the acquire script, as a lane's
// batch, and returns each one's verdict.
func ConsumeBatch(s *Store, ns string, reqs []*store.ConsumeRequest) ([]bool, error) {
	batch := make([]*pending, len(reqs))
	for i, req := range reqs {
		batch[i] = &pending{ctx: context.Background(), req: req, done: make(chan struct{}, 1)}
	}
	s.runBatch(ns, batch)
	granted := make([]bool, len(reqs))
	for i, p := range batch {
		<-p.done
		if p.err != nil {
			return nil, p.err
		}
		granted[i] = p.granted
	}
	return granted, nil
}
