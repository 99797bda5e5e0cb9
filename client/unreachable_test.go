package client_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
)

// A call that no server answers says so: server unreachable, not the
// store; it still matches ErrUnavailable, so fail-open callers degrade.
func TestServerUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Acquire(context.Background(), "k", "api", tollgate.Consume{"rpm": 1}, client.WithLimits(tollgate.PerMinute("rpm", 10)))
	var ue *tollgate.UnavailableError
	switch {
	case !errors.Is(err, client.ErrServerUnreachable):
		t.Errorf("err = %v, want ErrServerUnreachable", err)
	case !errors.Is(err, tollgate.ErrUnavailable) || !errors.As(err, &ue):
		t.Errorf("err = %v, want an *UnavailableError too", err)
	case !strings.HasPrefix(err.Error(), "server unreachable during POST /v1/acquire"):
		t.Errorf("message %q, want it to say the server is unreachable", err)
	}
}
