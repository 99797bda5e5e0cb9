package api

import "github.com/tollgate-rl/tollgate/model"

// CreateKeyRequest is the body of POST /v1/keys: a stored API key of the
// request's namespace.
type CreateKeyRequest struct {
	Name string `json:"name"`
	Role string `json:"role"` // "acquire", "read" or "admin"
	// Entity, if set, confines the key to that entity and its
	// descendants.
	Entity string `json:"entity,omitempty"`
	// AllowLimits lets the key send its own limits, and a looser
	// unavailable mode than the stored one.
	AllowLimits bool `json:"allow_limits,omitempty"`
	// ExpiresInS, if set, is how long the key works, in seconds.
	ExpiresInS int64 `json:"expires_in_s,omitempty"`
}

// KeyInfo describes a stored API key: never its secret, nor its hash.
type KeyInfo struct {
	Name        string `json:"name"`
	Namespace   string `json:"namespace"`
	Role        string `json:"role"`
	Entity      string `json:"entity,omitempty"`
	AllowLimits bool   `json:"allow_limits"`
	CreatedAtMS int64  `json:"created_at_ms"`
	ExpiresAtMS int64  `json:"expires_at_ms,omitempty"`
}

// CreatedKey answers POST /v1/keys: the key, and its secret in field
// "key", which the server does not keep and never shows again.
type CreatedKey struct {
	Secret string `json:"key"`
	KeyInfo
}

// KeysResponse answers GET /v1/keys, a page at a time: Next, if set, is
// the after of the next page.
type KeysResponse struct {
	Keys []KeyInfo `json:"keys"`
	Next string    `json:"next,omitempty"`
}

// FromKey describes k.
func FromKey(k model.Key) KeyInfo {
	return KeyInfo{Name: k.Name, Namespace: k.Namespace, Role: string(k.Role), Entity: k.Entity,
		AllowLimits: k.AllowLimits, CreatedAtMS: model.UnixMilli(k.CreatedAt), ExpiresAtMS: model.UnixMilli(k.ExpiresAt)}
}

// ToKey is FromKey's inverse (the hash stays empty).
func ToKey(k KeyInfo) model.Key {
	return model.Key{Name: k.Name, Namespace: k.Namespace, Role: model.Role(k.Role), Entity: k.Entity,
		AllowLimits: k.AllowLimits, CreatedAt: model.FromUnixMilli(k.CreatedAtMS), ExpiresAt: model.FromUnixMilli(k.ExpiresAtMS)}
}

// ResetRequest is the body of POST /v1/reset: refill the limits of an
// entity's bucket for a resource (every refilling one when Limits is
// empty), lifting a penalty.
type ResetRequest struct {
	Entity   string   `json:"entity"`
	Resource string   `json:"resource"`
	Limits   []string `json:"limits,omitempty"`
	Reason   string   `json:"reason,omitempty"`
}
