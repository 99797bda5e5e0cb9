package redis

// LuaWide is the scripts' wide-integer library, for its tests.
const LuaWide = luaWide
