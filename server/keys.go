package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// Stored API keys (POST /v1/keys) authenticate requests beside the keys
// file, on every replica over the store: a replica looks a bearer token's
// hash up in the store once, caches the answer (found or not) under the
// store's change generation, and drops it when the generation moves, so
// that a key revoked anywhere is refused here within the refresh interval
// (tollgate.ChangeWatch), and at once where it was revoked.

// keyCacheSize bounds the stored keys (and unknown tokens) a server
// remembers; keyCacheTTL is how long an answer stands when the generation
// cannot be read (a store that answers lookups but not that would
// otherwise keep a revoked key working).
const (
	keyCacheSize = 10_000
	keyCacheTTL  = time.Minute
)

// keyEntry is a cached lookup: the key, or found == false.
type keyEntry struct {
	key   model.Key
	found bool
	gen   uint64    // the change generation it was read under
	read  time.Time // when (wall clock)
}

// keyCache holds lookups of stored keys by hash, at most keyCacheSize:
// when full, an entry at random gives way.
type keyCache struct {
	mu sync.Mutex
	m  map[string]keyEntry
}

func (c *keyCache) get(hash string) (keyEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[hash]
	return e, ok
}

func (c *keyCache) put(hash string, e keyEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]keyEntry)
	}
	if _, ok := c.m[hash]; !ok && len(c.m) >= keyCacheSize {
		for h := range c.m { // map order: an entry at random
			delete(c.m, h)
			break
		}
	}
	c.m[hash] = e
}

func (c *keyCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
}

// storedKey returns the stored key of token (whose hash is hash), or an
// unauthenticated error. Only tokens of the form the server makes are
// looked up: any other string costs no store read. A store that fails
// leaves the last answer standing, if there is one.
func (s *Server) storedKey(ctx context.Context, token, hash string) (model.Key, error) {
	unknown := fmt.Errorf("%w: unknown API key", api.ErrUnauthenticated)
	if !looksGenerated(token) {
		return model.Key{}, unknown
	}
	gen := s.watch.Generation(ctx)
	e, cached := s.keyCache.get(hash)
	if !cached || e.gen != gen || time.Since(e.read) >= keyCacheTTL {
		k, err := s.admin.LookupKey(ctx, hash)
		switch {
		case err == nil || errors.Is(err, model.ErrKeyNotFound):
			e = keyEntry{key: k, found: err == nil, gen: gen, read: time.Now()}
			s.keyCache.put(hash, e)
		case !cached:
			return model.Key{}, err
		}
	}
	if !e.found {
		return model.Key{}, unknown
	}
	return e.key, nil
}

// looksGenerated reports whether token has the form of model.GenerateKey's
// secrets: "tg_" and 43 characters of unpadded URL-safe base64.
func looksGenerated(token string) bool {
	if len(token) != len(model.KeyPrefix)+43 || token[:len(model.KeyPrefix)] != model.KeyPrefix {
		return false
	}
	for i := len(model.KeyPrefix); i < len(token); i++ {
		c := token[i]
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// authState remembers whether the server authenticates: always with a
// keys file; without one, once the store holds a key. While it does not,
// the store is asked again whenever its change generation moves.
type authState struct {
	on atomic.Bool
	// checked is 1 + the generation the last check was made under (0:
	// never checked), so that the common case is two atomic loads.
	checked atomic.Uint64
	mu      sync.Mutex // one check at a time; guards the fields below
	// failedAt is when the last check failed (zero: it did not), and
	// failErr its error.
	failedAt time.Time
	failErr  error
}

// authRetry is how long after a failed check of the stored keys the store
// is not asked again: the requests meanwhile take the last answer (or,
// before the first, the failure) at once.
const authRetry = time.Second

// authOn reports whether requests must carry a key. A server without a
// keys file finds out from the store. When the store cannot tell, the last
// answer stands; before the first, the request fails (unavailable): the
// server cannot know whether to trust it.
//
// A store that does not answer is asked once, not by every request in
// turn: the requests that arrive during a check wait for it (one at a time
// would each wait for all those before), and for authRetry after a failed
// one none asks. (While the generation cannot be read the check is still
// made, once per authRetry: a store that answers it, and not the
// generation, must not keep a newly created key unenforced.)
func (s *Server) authOn(ctx context.Context) (bool, error) {
	a := &s.auth
	if s.keys != nil || a.on.Load() {
		return true, nil
	}
	gen := s.watch.Generation(ctx)
	if a.checked.Load() == gen+1 {
		return false, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.checked.Load(); c == gen+1 || a.on.Load() {
		return a.on.Load(), nil
	}
	if !a.failedAt.IsZero() && time.Since(a.failedAt) < authRetry {
		return a.lastAnswer()
	}
	has, err := s.anyStoredKey(ctx)
	if err != nil {
		a.failedAt, a.failErr = time.Now(), err
		return a.lastAnswer()
	}
	a.failedAt, a.failErr = time.Time{}, nil
	a.on.Store(has)
	a.checked.Store(gen + 1)
	return has, nil
}

// lastAnswer is authOn's answer when the store could not tell: the last
// one (auth was off, or authOn would not have asked), or before the first
// the failure. The caller holds a.mu.
func (a *authState) lastAnswer() (bool, error) {
	if a.checked.Load() != 0 {
		return false, nil
	}
	return false, a.failErr
}

// Authenticates reports whether the server requires an API key: it has
// a keys file, or the store holds a key (it asks the store, unless it
// knows already).
func (s *Server) Authenticates(ctx context.Context) (bool, error) { return s.authOn(ctx) }

// anyStoredKey reports whether any namespace of the store holds a key.
func (s *Server) anyStoredKey(ctx context.Context) (bool, error) {
	nss, err := s.admin.ListNamespaces(ctx)
	if err != nil {
		return false, err
	}
	for _, n := range nss {
		if n.Deleted() {
			continue
		}
		adm, err := tollgate.NewAdmin(s.store, tollgate.WithNamespace(n.Name), tollgate.WithClock(s.clock), tollgate.WithChangeWatch(s.watch))
		if err != nil {
			return false, err
		}
		ks, err := adm.Keys(ctx, "", 1)
		if err != nil {
			return false, err
		}
		if len(ks) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// keysChanged drops what this server remembers of stored keys after a
// change it made, so that the change is in force here at once.
func (s *Server) keysChanged() {
	s.keyCache.clear()
	s.auth.checked.Store(0)
}

// maxKeyExpirySeconds bounds expires_in_s.
var maxKeyExpirySeconds = int64(model.MaxKeyExpiry / time.Second)

func (s *Server) createKey(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.CreateKeyRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.ExpiresInS < 0 || req.ExpiresInS > maxKeyExpirySeconds {
		return model.Invalid("expires_in_s", strconv.FormatInt(req.ExpiresInS, 10), "want 0 (never) to "+strconv.FormatInt(maxKeyExpirySeconds, 10))
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	spec := tollgate.KeySpec{Name: req.Name, Role: model.Role(req.Role), Entity: req.Entity, AllowLimits: req.AllowLimits,
		ExpiresIn: time.Duration(req.ExpiresInS) * time.Second}
	secret, k, err := adm.CreateKey(r.Context(), spec, c.writeOpts()...)
	if err != nil {
		return err
	}
	s.keysChanged()
	writeJSON(w, http.StatusCreated, api.CreatedKey{Secret: secret, KeyInfo: api.FromKey(k)})
	return nil
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	limit, err := pageLimit(q, 100, model.MaxKeyPage)
	if err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	ks, err := adm.Keys(r.Context(), q.Get("after"), limit)
	if err != nil {
		return err
	}
	resp := api.KeysResponse{Keys: make([]api.KeyInfo, len(ks))}
	for i, k := range ks {
		resp.Keys[i] = api.FromKey(k)
	}
	if len(ks) == limit {
		resp.Next = ks[len(ks)-1].Name
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, c *call) error {
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	err = adm.RevokeKey(r.Context(), r.PathValue("name"), c.writeOpts()...)
	if err == nil {
		s.keysChanged()
	}
	return noContent(w, err)
}
