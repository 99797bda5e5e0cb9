package dynamodb

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Listing entities and configs reads GSI4 (partitions {ns}#{0..f}, sort
// key the item's PK, merged in sort-key order: nsindex.go) over the range
// of one kind of partition, {ns}/ENTITY# or {ns}/RESOURCE#, with a filter
// on SK that keeps the entity or config items, then reads those items
// strongly with BatchGetItem. See docs/dynamodb.md 3 and 5 for what it
// costs.

// gsi4Page bounds the index entries the first Queries of a listing
// evaluate, over all the namespace's parts (gsi4PartPage each).
const gsi4Page = 1000

// ListEntities implements store.Entities through GSI4.
func (s *Store) ListEntities(ctx context.Context, ns, after string, limit int) ([]model.Entity, error) {
	if err := store.ValidatePage(limit, store.MaxEntityPage); err != nil {
		return nil, err
	}
	from := entityPK(ns, after)
	var keys []item
	err := s.gsi4Range(ctx, ns, entityPK(ns, ""), from, "SK = :sk", item{":sk": str(skMeta)}, func(it item) bool {
		if getS(it, attrPK) != from {
			keys = append(keys, item{attrPK: it[attrPK], attrSK: it[attrSK]})
		}
		return len(keys) < limit
	})
	if err != nil || len(keys) == 0 {
		return nil, err
	}
	its, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]model.Entity, 0, len(its))
	for _, it := range its {
		if it == nil {
			continue // deleted since the index listed it
		}
		e, err := decodeEntity(it)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// UpdateEntity implements store.Entities: the entity is read (and pre
// checked against it), a new parent's chain walked (store.CheckAncestry,
// one GetItem per ancestor), then one transaction puts the entity at the
// next version (conditioned on it being still at the version read: else
// it is read again; the new item's GSI1 keys move it under its new
// parent, or out of GSI1), puts the audit event and checks that a new
// parent exists. The walk is not part of the transaction: two concurrent
// moves can still make a cycle, which cascades survive (they stop at
// model.MaxCascadeDepth).
func (s *Store) UpdateEntity(ctx context.Context, ns string, e model.Entity, ev model.AuditEvent, pre ...store.Precondition) error {
	for range maxVersionRetries {
		old, err := s.GetEntity(ctx, ns, e.ID)
		if err != nil {
			return err
		}
		if err := store.CheckVersion(old.Version, pre); err != nil {
			return err
		}
		moved := old.ParentID != e.ParentID
		if moved {
			if err := store.CheckAncestry(e.ID, e.ParentID, s.parentOf(ctx, ns)); err != nil {
				return err
			}
		}
		e.CreatedAt, e.Version = old.CreatedAt, old.Version+1
		items, err := s.entityWrite(ns, e, ev, versionIs(old.Version), moved && e.ParentID != "")
		if err != nil {
			return err
		}
		reasons, err := s.transactMeta(ctx, items)
		switch {
		case failed(reasons, 2):
			return model.ErrEntityNotFound
		case failed(reasons, 0):
			continue // changed or deleted since read
		}
		return err
	}
	return errKeptChanging
}

// parentOf reads entities' parents, for store.CheckAncestry.
func (s *Store) parentOf(ctx context.Context, ns string) func(id string) (string, bool, error) {
	return func(id string) (string, bool, error) {
		e, err := s.GetEntity(ctx, ns, id)
		switch {
		case errors.Is(err, model.ErrEntityNotFound):
			return "", false, nil
		case err != nil:
			return "", false, err
		}
		return e.ParentID, true, nil
	}
}

// ListConfigs implements store.Configs: the system config with a GetItem,
// resource configs through GSI4 over {ns}/RESOURCE#, entity configs
// through GSI4 over {ns}/ENTITY# (filtered on SK "#CONFIG#"), each kind
// then read strongly with BatchGetItem, until the page is full.
func (s *Store) ListConfigs(ctx context.Context, ns string, after *model.Scope, limit int) ([]model.ScopedConfig, error) {
	if err := store.ValidatePage(limit, store.MaxConfigPage); err != nil {
		return nil, err
	}
	var out []model.ScopedConfig
	if after == nil {
		if err := s.appendConfigs(ctx, ns, &out, []model.Scope{model.SystemScope()}); err != nil {
			return nil, err
		}
	}
	if len(out) < limit && (after == nil || after.Entity == "") {
		scopes, err := s.resourceConfigScopes(ctx, ns, after, limit-len(out))
		if err == nil {
			err = s.appendConfigs(ctx, ns, &out, scopes)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(out) < limit {
		scopes, err := s.entityConfigScopes(ctx, ns, after, limit-len(out))
		if err == nil {
			err = s.appendConfigs(ctx, ns, &out, scopes)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// appendConfigs reads the configs at scopes and appends those that exist
// (one deleted since an index listed it does not).
func (s *Store) appendConfigs(ctx context.Context, ns string, out *[]model.ScopedConfig, scopes []model.Scope) error {
	if len(scopes) == 0 {
		return nil
	}
	cfgs, err := s.GetConfigs(ctx, ns, scopes)
	if err != nil {
		return err
	}
	for i, c := range cfgs {
		if c != nil {
			*out = append(*out, model.ScopedConfig{Scope: scopes[i], Config: *c})
		}
	}
	return nil
}

// resourceConfigScopes lists up to limit resource scopes with a config
// after *after (a resource or the system scope; nil: all).
func (s *Store) resourceConfigScopes(ctx context.Context, ns string, after *model.Scope, limit int) ([]model.Scope, error) {
	prefix := resourcePK(ns, "")
	from := prefix
	if after != nil {
		from = resourcePK(ns, after.Resource)
	}
	var out []model.Scope
	err := s.gsi4Range(ctx, ns, prefix, from, "SK = :sk", item{":sk": str(skConfig)}, func(it item) bool {
		if pk := getS(it, attrPK); pk != from {
			out = append(out, model.ResourceScope(strings.TrimPrefix(pk, prefix)))
		}
		return len(out) < limit
	})
	return out, err
}

// entityConfigScopes lists up to limit entity scopes with a config after
// *after. Every config of an entity shares its GSI4 sort key (the entity's
// PK) and so comes back in no set order: the walk reads each entity's
// configs to the end before it stops, then sorts.
func (s *Store) entityConfigScopes(ctx context.Context, ns string, after *model.Scope, limit int) ([]model.Scope, error) {
	prefix := entityPK(ns, "")
	from := prefix
	if after != nil && after.Entity != "" {
		from = entityPK(ns, after.Entity)
	}
	var out []model.Scope
	lastPK := ""
	cfgPrefix := entityConfigSK("")
	err := s.gsi4Range(ctx, ns, prefix, from, "begins_with(SK, :sk)", item{":sk": str(cfgPrefix)}, func(it item) bool {
		pk := getS(it, attrPK)
		if len(out) >= limit && pk != lastPK {
			return false
		}
		sc := model.Scope{Entity: strings.TrimPrefix(pk, prefix), Resource: strings.TrimPrefix(getS(it, attrSK), cfgPrefix)}
		if after == nil || model.CompareScopes(sc, *after) > 0 {
			out, lastPK = append(out, sc), pk
		}
		return true
	})
	slices.SortFunc(out, model.CompareScopes)
	return out[:min(len(out), limit)], err
}

// gsi4Range visits in GSI4 sort-key order the index entries of namespace
// ns from the partition key from to the end of prefix's range (prefix
// ends with '#') that pass filter, until visit returns false: the
// namespace's parts merged.
func (s *Store) gsi4Range(ctx context.Context, ns, prefix, from, filter string, values item, visit func(it item) bool) error {
	keys, err := s.namespaceIndexKeys(ctx, ns)
	if err != nil {
		return err
	}
	vals := item{":from": str(from), ":to": str(strings.TrimSuffix(prefix, "#") + "$")}
	maps.Copy(vals, values)
	return s.mergeIndex(ctx, keys, &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(gsi4),
		KeyConditionExpression:    aws.String("GSI4PK = :ns AND GSI4SK BETWEEN :from AND :to"),
		FilterExpression:          aws.String(filter),
		ExpressionAttributeValues: vals,
		Limit:                     aws.Int32(gsi4PartPage),
	}, visit)
}
