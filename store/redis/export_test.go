package redis

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
