package redis

// layout names the Store's keys. Every key of a namespace has the form
//
//	<prefix>:{<namespace id>}:<kind>:<rest>
//
// so that its hash slot is the namespace's (the part in braces is the
// hash tag, docs/redis.md "Hash slots"). Entity ids, resources and limit
// names cannot hold '|' (model's identifier rules), which separates them.
// The keys outside any namespace (the namespace registry, the API-key
// index by hash, the change generation) have tags of their own.
type layout struct{ prefix string }

// ns returns the start of every key of namespace ns.
func (l layout) ns(ns string) string { return l.prefix + ":{" + ns + "}:" }

// bucket is the hash of one bucket: for each limit, field "p|<name>" holds
// its parameters and field "v|<name>" its stored number; field "r" the
// last acquire's time.
func (l layout) bucket(ns, entity, resource string) string {
	return l.ns(ns) + "b:" + entity + "|" + resource
}

// buckets is the sorted set of a namespace's buckets by resource and
// entity ("<resource>|<entity>", score 0), for ListBuckets and purges.
func (l layout) buckets(ns string) string { return l.ns(ns) + "bi" }

// lease is the hash of a durable lease's record.
func (l layout) lease(ns, id string) string { return l.ns(ns) + "l:" + id }

// leases is the sorted set of a namespace's open lease ids (score 0),
// for ListLeases; leasesOf an entity's; leaseExpiries the open leases
// that expire, scored by expiry.
func (l layout) leases(ns string) string           { return l.ns(ns) + "li" }
func (l layout) leasesOf(ns, entity string) string { return l.ns(ns) + "le:" + entity }
func (l layout) leaseExpiries(ns string) string    { return l.ns(ns) + "lx" }

// config is the string of one scope's configuration (JSON).
func (l layout) config(ns, scope string) string { return l.ns(ns) + "c:" + scope }

// configs is the sorted set of a namespace's configured scopes.
func (l layout) configs(ns string) string { return l.ns(ns) + "ci" }

// entity is the string of one entity (JSON).
func (l layout) entity(ns, id string) string { return l.ns(ns) + "e:" + id }

// entities is the sorted set of a namespace's entity ids.
func (l layout) entities(ns string) string { return l.ns(ns) + "ei" }

// children is the sorted set of the ids of an entity's children.
func (l layout) children(ns, parent string) string { return l.ns(ns) + "ec:" + parent }

// audit is the hash of a namespace's audit events by id (JSON).
func (l layout) audit(ns string) string { return l.ns(ns) + "a" }

// auditAll and auditOf are the sorted sets of a namespace's event ids,
// all of them and an entity's.
func (l layout) auditAll(ns string) string        { return l.ns(ns) + "ai" }
func (l layout) auditOf(ns, entity string) string { return l.ns(ns) + "ae:" + entity }

// key is the hash of a namespace's stored API keys by name (JSON).
func (l layout) apiKeys(ns string) string { return l.ns(ns) + "k" }

// usage is the hash of a namespace's usage snapshots.
func (l layout) usage(ns string) string { return l.ns(ns) + "u" }

// namespace is the registration of a namespace name (JSON); namespaces is
// the sorted set of the names.
func (l layout) namespace(name string) string { return l.prefix + ":{ns}:n:" + name }
func (l layout) namespaces() string           { return l.prefix + ":{ns}:ni" }

// keyHash is the index of API keys by hash: the key's namespace id and
// name.
func (l layout) keyHash(hash string) string { return l.prefix + ":{kh}:" + hash }

// generation is the change generation (store.Changes).
func (l layout) generation() string { return l.prefix + ":{gen}" }
