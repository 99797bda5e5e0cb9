package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// Role is what an API key may do within its namespace (model.Role).
type Role = model.Role

// Roles. A key's namespace "*" reaches every namespace and, with RoleAdmin,
// the namespace registry itself.
const (
	RoleAcquire = model.RoleAcquire
	RoleRead    = model.RoleRead
	RoleAdmin   = model.RoleAdmin
)

// AnyNamespace as a key's namespace reaches every namespace.
const AnyNamespace = "*"

// Keys is a set of API keys read from a keys file, looked up by hash:
// the bootstrap keys, beside the keys the store holds (POST /v1/keys).
type Keys struct {
	byHash map[string]model.Key
}

// HashKey returns the hash under which key is configured (model.HashKey).
func HashKey(key string) string { return model.HashKey(key) }

// GenerateKey returns a new random API key ("tg_" and 43 URL-safe
// characters) and its hash (model.GenerateKey).
func GenerateKey() (key, hash string) { return model.GenerateKey() }

// LoadKeys reads a keys file: one key per line, "HASH NAMESPACE ROLE NAME"
// and optionally "entity=ID" (the key acts only on that entity and its
// descendants) and "allow_limits" (it may send its own limits), with
// blank lines and lines starting with '#' ignored, e.g.
//
//	# ops team, everything everywhere
//	sha256:9f86d0...  *        admin    ops
//	sha256:2c26b4...  default  acquire  checkout-service
//	sha256:fcde2b...  default  acquire  org-1-gateway  entity=org-1
func LoadKeys(r io.Reader) (*Keys, error) {
	k := &Keys{byHash: map[string]model.Key{}}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		key, err := parseKeyLine(text)
		if err != nil {
			return nil, fmt.Errorf("keys file line %d: %w", line, err)
		}
		if _, dup := k.byHash[key.Hash]; dup {
			return nil, fmt.Errorf("keys file line %d: the same key twice", line)
		}
		k.byHash[key.Hash] = key
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("keys file: %w", err)
	}
	if len(k.byHash) == 0 {
		return nil, fmt.Errorf("keys file: no keys")
	}
	return k, nil
}

func parseKeyLine(text string) (model.Key, error) {
	f := strings.Fields(text)
	if len(f) < 4 {
		return model.Key{}, fmt.Errorf("want at least 4 fields (hash namespace role name), got %d", len(f))
	}
	key := model.Key{Hash: f[0], Namespace: f[1], Role: Role(f[2]), Name: f[3]}
	if err := model.ValidateKeyHash(key.Hash); err != nil {
		return model.Key{}, err
	}
	if key.Namespace != AnyNamespace {
		if err := model.ValidateNamespace(key.Namespace); err != nil {
			return model.Key{}, err
		}
	}
	if err := key.Role.Validate(); err != nil {
		return model.Key{}, err
	}
	for _, opt := range f[4:] {
		name, value, _ := strings.Cut(opt, "=")
		switch {
		case opt == "allow_limits":
			key.AllowLimits = true
		case name == "entity" && key.Namespace != AnyNamespace:
			if err := model.ValidateEntityID(value); err != nil {
				return model.Key{}, err
			}
			key.Entity = value
		case name == "entity":
			return model.Key{}, fmt.Errorf("entity=%s: a key of every namespace cannot be confined to an entity", value)
		default:
			return model.Key{}, fmt.Errorf("option %q: want entity=ID or allow_limits", opt)
		}
	}
	return key, nil
}

// access is what a route needs: the roles that may call it, whether it
// works on the namespace registry (global admin keys only), and whether a
// key confined to an entity may call it (the handler then checks the
// entity it acts on: call.checkEntity).
type access struct {
	roles    []Role
	registry bool
	scoped   bool
}

var (
	forAcquire   = access{roles: []Role{RoleAcquire, RoleAdmin}, scoped: true}
	forAvailable = access{roles: []Role{RoleAcquire, RoleRead, RoleAdmin}, scoped: true}
	forRead      = access{roles: []Role{RoleRead, RoleAdmin}}
	forReadScope = access{roles: []Role{RoleRead, RoleAdmin}, scoped: true}
	forAdmin     = access{roles: []Role{RoleAdmin}}
	forReset     = access{roles: []Role{RoleAdmin}, scoped: true}
	forRegistry  = access{roles: []Role{RoleAdmin}, registry: true}
	forEveryone  = access{}
)

// authorize resolves the request's namespace, key and principal into c
// and checks the key's access; c is the request's only if authorize
// returns nil. Without keys (no keys file and none stored) everything is
// allowed, and the principal is the api.PrincipalHeader header.
func (s *Server) authorize(r *http.Request, a access, c *call) error {
	*c = call{s: s, ns: r.Header.Get(api.NamespaceHeader)}
	var key *model.Key
	if a.roles != nil {
		var err error
		if key, err = s.authenticate(r); err != nil {
			return err
		}
	}
	if key == nil {
		c.principal = r.Header.Get(api.PrincipalHeader)
		if c.ns == "" {
			c.ns = model.DefaultNamespace
		}
		return nil
	}
	c.key, c.principal = key, key.Name
	switch {
	case c.ns == "" && key.Namespace != AnyNamespace:
		c.ns = key.Namespace
	case c.ns == "":
		c.ns = model.DefaultNamespace
	case key.Namespace != AnyNamespace && c.ns != key.Namespace:
		return fmt.Errorf("%w: key %s is for namespace %s", api.ErrPermissionDenied, key.Name, key.Namespace)
	}
	if a.registry && key.Namespace != AnyNamespace {
		return fmt.Errorf("%w: the namespace registry needs a key for namespace *", api.ErrPermissionDenied)
	}
	if key.Scoped() && !a.scoped {
		return fmt.Errorf("%w: key %s acts only on entity %s and its descendants, and this route reaches beyond them",
			api.ErrPermissionDenied, key.Name, key.Entity)
	}
	for _, role := range a.roles {
		if key.Role == role {
			return nil
		}
	}
	return fmt.Errorf("%w: role %s may not do this", api.ErrPermissionDenied, key.Role)
}

// authenticate returns the key of r's bearer token, or nil when the
// server authenticates nobody (no keys file, and the store holds no key).
func (s *Server) authenticate(r *http.Request) (*model.Key, error) {
	on, err := s.authOn(r.Context())
	if err != nil || !on {
		return nil, err
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, fmt.Errorf("%w: send Authorization: Bearer <key>", api.ErrUnauthenticated)
	}
	hash := model.HashKey(token)
	if s.keys != nil {
		if k, ok := s.keys.byHash[hash]; ok {
			return &k, nil
		}
	}
	k, err := s.storedKey(r.Context(), token, hash)
	if err != nil {
		return nil, err
	}
	if now := s.clock.Now(); k.Expired(now) {
		return nil, fmt.Errorf("%w: API key %s expired at %s", api.ErrUnauthenticated, k.Name,
			k.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z07:00"))
	}
	return &k, nil
}

// mayOverride reports whether the request may send its own limits, or a
// looser unavailable mode than the stored one: without keys, with an admin
// key, or with a key created with allow_limits.
func (c *call) mayOverride() bool {
	return c.key == nil || c.key.Role == RoleAdmin || c.key.AllowLimits
}

// checkOverrides refuses limits and an unavailable mode that the request
// may not send (mayOverride): its own limits, or "allow" where the stored
// mode (as the limiter last read it) is not. Stored limits are
// authoritative against callers: nothing is debited or rewritten.
func (c *call) checkOverrides(ctx context.Context, limits []string, mode string) error {
	if c.mayOverride() {
		return nil
	}
	if len(limits) > 0 {
		return &api.PermissionError{Field: "limits", Reason: "key " + c.key.Name +
			" may not send its own limits: the stored limits apply (an admin key, or a key created with allow_limits, may)"}
	}
	if model.OnUnavailable(mode) != model.Allow {
		return nil
	}
	lim, err := c.limiter(ctx)
	if err != nil {
		return err
	}
	if lim.UnavailableMode(ctx) == model.Allow {
		return nil
	}
	return &api.PermissionError{Field: "on_unavailable", Reason: "key " + c.key.Name +
		" may not ask for allow: the stored mode is block (an admin key, or a key created with allow_limits, may)"}
}

// checkEntity refuses an entity outside the scope of a key confined to
// one (an entity and its descendants).
func (c *call) checkEntity(ctx context.Context, entity string) error {
	if c.key == nil || !c.key.Scoped() {
		return nil
	}
	lim, err := c.limiter(ctx)
	if err != nil {
		return err
	}
	ok, err := lim.Within(ctx, entity, c.key.Entity)
	switch {
	case err != nil:
		return err
	case !ok:
		return &api.PermissionError{Field: "entity", Reason: "key " + c.key.Name + " acts only on entity " +
			strconv.Quote(c.key.Entity) + " and its descendants, not on " + strconv.Quote(entity)}
	}
	return nil
}

// needEntity is checkEntity for a listing or read of a query: a key
// confined to an entity must name one (field) within its scope.
func (c *call) needEntity(ctx context.Context, field, entity string) error {
	if c.key != nil && c.key.Scoped() && entity == "" {
		return &api.PermissionError{Field: field, Reason: "key " + c.key.Name + " is confined to entity " +
			strconv.Quote(c.key.Entity) + ": name it, or one of its descendants"}
	}
	return c.checkEntity(ctx, entity)
}
