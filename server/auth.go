package server

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// Role is what an API key may do within its namespace.
type Role string

// Roles. A key's namespace "*" reaches every namespace and, with RoleAdmin,
// the namespace registry itself.
const (
	// RoleAcquire may acquire, use leases, reserve and release resource
	// ids, penalize (a vendor's 429), and read availability and
	// reservations.
	RoleAcquire Role = "acquire"
	// RoleRead may read availability, reservations, entities, limits and
	// the audit log.
	RoleRead Role = "read"
	// RoleAdmin may do everything in its namespace.
	RoleAdmin Role = "admin"
)

// AnyNamespace as a key's namespace reaches every namespace.
const AnyNamespace = "*"

// Key is one API key as configured: never the key itself, only its hash.
type Key struct {
	Hash      string // "sha256:" + hex of the key's SHA-256
	Namespace string // or AnyNamespace
	Role      Role
	Name      string // who holds it; recorded as the principal of changes
}

// Keys is a set of API keys, looked up by hash.
type Keys struct {
	byHash map[string]Key
}

// HashKey returns the hash under which key is configured.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// GenerateKey returns a new random API key ("tg_" and 43 URL-safe
// characters) and its hash.
func GenerateKey() (key, hash string) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	key = "tg_" + base64.RawURLEncoding.EncodeToString(b[:])
	return key, HashKey(key)
}

// LoadKeys reads a keys file: one key per line, "HASH NAMESPACE ROLE NAME",
// with blank lines and lines starting with '#' ignored, e.g.
//
//	# ops team, everything everywhere
//	sha256:9f86d0...  *        admin    ops
//	sha256:2c26b4...  default  acquire  checkout-service
func LoadKeys(r io.Reader) (*Keys, error) {
	k := &Keys{byHash: map[string]Key{}}
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

func parseKeyLine(text string) (Key, error) {
	f := strings.Fields(text)
	if len(f) != 4 {
		return Key{}, fmt.Errorf("want 4 fields (hash namespace role name), got %d", len(f))
	}
	key := Key{Hash: f[0], Namespace: f[1], Role: Role(f[2]), Name: f[3]}
	if h, ok := strings.CutPrefix(key.Hash, "sha256:"); !ok || len(h) != 64 || !isHex(h) {
		return Key{}, fmt.Errorf("hash %.20q: want sha256: and 64 hex digits", key.Hash)
	}
	if key.Namespace != AnyNamespace {
		if err := model.ValidateNamespace(key.Namespace); err != nil {
			return Key{}, err
		}
	}
	switch key.Role {
	case RoleAcquire, RoleRead, RoleAdmin:
	default:
		return Key{}, fmt.Errorf("role %q: want acquire, read or admin", key.Role)
	}
	return key, nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// access is what a route needs: the roles that may call it, and whether it
// works on the namespace registry (global admin keys only).
type access struct {
	roles    []Role
	registry bool
}

var (
	forAcquire   = access{roles: []Role{RoleAcquire, RoleAdmin}}
	forAvailable = access{roles: []Role{RoleAcquire, RoleRead, RoleAdmin}}
	forRead      = access{roles: []Role{RoleRead, RoleAdmin}}
	forAdmin     = access{roles: []Role{RoleAdmin}}
	forRegistry  = access{roles: []Role{RoleAdmin}, registry: true}
	forEveryone  = access{}
)

// authorize resolves the request's namespace and principal into c and
// checks its key; c is the request's only if authorize returns nil.
// Without keys configured everything is allowed, and the principal is the
// api.PrincipalHeader header.
func (s *Server) authorize(r *http.Request, a access, c *call) error {
	*c = call{s: s, ns: r.Header.Get(api.NamespaceHeader)}
	if s.keys == nil || a.roles == nil {
		c.principal = r.Header.Get(api.PrincipalHeader)
		if c.ns == "" {
			c.ns = model.DefaultNamespace
		}
		return nil
	}
	auth := r.Header.Get("Authorization")
	scheme, token, _ := strings.Cut(auth, " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return fmt.Errorf("%w: send Authorization: Bearer <key>", api.ErrUnauthenticated)
	}
	key, ok := s.keys.byHash[HashKey(token)]
	if !ok {
		return fmt.Errorf("%w: unknown API key", api.ErrUnauthenticated)
	}
	c.principal = key.Name
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
	for _, role := range a.roles {
		if key.Role == role {
			return nil
		}
	}
	return fmt.Errorf("%w: role %s may not do this", api.ErrPermissionDenied, key.Role)
}
