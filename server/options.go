package server

import (
	"encoding/binary"
	"sync"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// maxLimitOptions bounds limitOptions; when it is full it starts afresh.
const maxLimitOptions = 256

// limitOptions remembers the tollgate.WithLimits options of the limits
// lists requests carried: a client that sends its limits with every acquire
// sends the same few lists, and parsing and validating them took about an
// eighth of the acquire handler's time (BenchmarkAcquireCommitHandler).
// An option is immutable and made to be reused (WithLimits validates once,
// when it is made), so a remembered one does what a new one would. Only
// lists that parse are remembered.
type limitOptions struct {
	mu   sync.RWMutex
	byID map[string]tollgate.AcquireOption // by limitsKey
}

// option returns the WithLimits option of limits, which must not be
// empty; an error is the *model.ValidationError of api.ToConfig.
func (c *limitOptions) option(limits []string) (tollgate.AcquireOption, error) {
	var keyBuf [128]byte
	key := limitsKey(keyBuf[:0], limits)
	c.mu.RLock()
	o, ok := c.byID[string(key)]
	c.mu.RUnlock()
	if ok {
		return o, nil
	}
	cfg, err := api.ToConfig(api.Limits{Limits: limits})
	if err != nil {
		return nil, err
	}
	o = tollgate.WithLimits(cfg.Limits...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil || len(c.byID) >= maxLimitOptions {
		c.byID = make(map[string]tollgate.AcquireOption)
	}
	c.byID[string(key)] = o
	return o, nil
}

// limitsKey appends a key that tells every list of strings apart: each
// one's length, then its bytes.
func limitsKey(b []byte, limits []string) []byte {
	for _, l := range limits {
		b = binary.AppendUvarint(b, uint64(len(l)))
		b = append(b, l...)
	}
	return b
}

// acquireOptions turns the optional limits and mode of a request into
// options, validating them, appended to opts.
func (s *Server) acquireOptions(opts []tollgate.AcquireOption, limits []string, mode string) ([]tollgate.AcquireOption, error) {
	if len(limits) > 0 {
		o, err := s.limitsCache.option(limits)
		if err != nil {
			return nil, err
		}
		opts = append(opts, o)
	}
	if mode != "" {
		m := model.OnUnavailable(mode)
		if err := m.Validate(); err != nil {
			return nil, err
		}
		opts = append(opts, tollgate.WithOnUnavailable(m))
	}
	return opts, nil
}
