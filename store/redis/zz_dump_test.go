package redis

import (
	"os"
	"testing"
)

func TestZZDump(t *testing.T) {
	os.WriteFile(os.Getenv("DUMP"), []byte(luaConsume), 0o644)
}
