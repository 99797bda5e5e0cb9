package dynamodb

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// Attribute values: internal/schema's helpers, by this package's short
// names.
type item = schema.Item

func num(v int64) types.AttributeValue         { return schema.Num(v) }
func str(v string) types.AttributeValue        { return schema.Str(v) }
func boolean(v bool) types.AttributeValue      { return schema.Bool(v) }
func getS(it item, name string) string         { return schema.GetS(it, name) }
func getN(it item, name string) (int64, error) { return schema.GetN(it, name) }
func getBool(it item, name string) bool        { return schema.GetBool(it, name) }

func encodeEntity(ns string, e model.Entity) (item, error) {
	meta := ""
	if len(e.Metadata) > 0 {
		b, err := json.Marshal(e.Metadata)
		if err != nil {
			return nil, err
		}
		meta = string(b)
	}
	it := item{
		attrPK:       str(entityPK(ns, e.ID)),
		attrSK:       str(skMeta),
		"id":         str(e.ID),
		"name":       str(e.Name),
		"parent_id":  str(e.ParentID),
		"cascade":    boolean(e.Cascade),
		"metadata":   str(meta),
		"created_at": num(e.CreatedAt.UnixMilli()),
		attrGSI4PK:   str(namespaceIndexPK(ns, entityPK(ns, e.ID), skMeta)),
		attrGSI4SK:   str(entityPK(ns, e.ID)),
	}
	setVersion(it, e.Version)
	if e.ParentID != "" {
		it[attrGSI1PK] = str(parentGSI1PK(ns, e.ParentID))
		it[attrGSI1SK] = str(e.ID)
	}
	return it, nil
}

func decodeEntity(it item) (model.Entity, error) {
	e := model.Entity{
		ID:       getS(it, "id"),
		Name:     getS(it, "name"),
		ParentID: getS(it, "parent_id"),
		Cascade:  getBool(it, "cascade"),
		Version:  versionOf(it),
	}
	created, err := getN(it, "created_at")
	if err != nil {
		return e, err
	}
	e.CreatedAt = time.UnixMilli(created).UTC()
	if m := getS(it, "metadata"); m != "" {
		if err := json.Unmarshal([]byte(m), &e.Metadata); err != nil {
			return e, fmt.Errorf("dynamodb: entity %s metadata: %w", e.ID, err)
		}
	}
	return e, nil
}

// configKey returns the primary key of the config at scope.
func configKey(ns string, s model.Scope) item {
	switch s.Level() {
	case "system":
		return item{attrPK: str(systemPK(ns)), attrSK: str(skConfig)}
	case "resource":
		return item{attrPK: str(resourcePK(ns, s.Resource)), attrSK: str(skConfig)}
	}
	return item{attrPK: str(entityPK(ns, s.Entity)), attrSK: str(entityConfigSK(s.Resource))}
}

func encodeConfig(ns string, s model.Scope, c model.Config) item {
	it := configKey(ns, s)
	limits := make([]types.AttributeValue, len(c.Limits))
	for i, l := range c.Limits {
		limits[i] = str(l.String())
	}
	it["limits"] = &types.AttributeValueMemberL{Value: limits}
	if len(c.Shadow) > 0 {
		it["shadow"] = &types.AttributeValueMemberSS{Value: c.Shadow}
	}
	if len(c.AlertAt) > 0 {
		// A list, not a number set: it keeps the thresholds' order.
		at := make([]types.AttributeValue, len(c.AlertAt))
		for i, t := range c.AlertAt {
			at[i] = &types.AttributeValueMemberN{Value: strconv.FormatFloat(t, 'g', -1, 64)}
		}
		it["alert_at"] = &types.AttributeValueMemberL{Value: at}
	}
	it["level"] = str(s.Level())
	setVersion(it, c.Version)
	if c.OnUnavailable != "" {
		it["on_unavailable"] = str(string(c.OnUnavailable))
	}
	it[attrGSI4PK] = str(namespaceIndexKey(ns, it))
	it[attrGSI4SK] = it[attrPK]
	if s.Entity != "" {
		// Sparse index: which entities have custom config for a resource.
		it[attrGSI3PK] = str(resourcePK(ns, s.Resource))
		it[attrGSI3SK] = str("CONFIG#" + s.Entity)
	}
	return it
}

func decodeConfig(it item) (*model.Config, error) {
	c := &model.Config{OnUnavailable: model.OnUnavailable(getS(it, "on_unavailable")), Version: versionOf(it)}
	if ss, ok := it["shadow"].(*types.AttributeValueMemberSS); ok {
		c.Shadow = ss.Value
	}
	if at, ok := it["alert_at"].(*types.AttributeValueMemberL); ok {
		for _, v := range at.Value {
			n, ok := v.(*types.AttributeValueMemberN)
			if !ok {
				return nil, fmt.Errorf("dynamodb: config alert threshold is not a number")
			}
			t, err := strconv.ParseFloat(n.Value, 64)
			if err != nil {
				return nil, fmt.Errorf("dynamodb: stored alert threshold %q: %w", n.Value, err)
			}
			c.AlertAt = append(c.AlertAt, t)
		}
	}
	list, _ := it["limits"].(*types.AttributeValueMemberL)
	if list == nil {
		return c, nil
	}
	for _, v := range list.Value {
		s, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			return nil, fmt.Errorf("dynamodb: config limit is not a string")
		}
		l, err := model.ParseLimit(s.Value)
		if err != nil {
			return nil, fmt.Errorf("dynamodb: stored limit %q: %w", s.Value, err)
		}
		c.Limits = append(c.Limits, l)
	}
	return c, nil
}

func encodeAudit(ns string, ev model.AuditEvent) (item, error) {
	it := item{
		attrPK:      str(auditPK(ns, ev.Entity)),
		attrSK:      str(auditSK(ev.ID)),
		"id":        str(ev.ID),
		"time":      num(ev.Time.UnixMilli()),
		"action":    str(ev.Action),
		"entity":    str(ev.Entity),
		"resource":  str(ev.Resource),
		"principal": str(ev.Principal),
		attrGSI4PK:  str(namespaceIndexPK(ns, auditPK(ns, ev.Entity), auditSK(ev.ID))),
		attrGSI4SK:  str(schema.AuditLogGSI4SK(ns, ev.ID)),
	}
	if len(ev.Details) > 0 {
		b, err := json.Marshal(ev.Details)
		if err != nil {
			return nil, err
		}
		it["details"] = str(string(b))
	}
	return it, nil
}

func decodeAudit(it item) (model.AuditEvent, error) {
	ev := model.AuditEvent{
		ID:        getS(it, "id"),
		Action:    getS(it, "action"),
		Entity:    getS(it, "entity"),
		Resource:  getS(it, "resource"),
		Principal: getS(it, "principal"),
	}
	t, err := getN(it, "time")
	if err != nil {
		return ev, err
	}
	ev.Time = time.UnixMilli(t).UTC()
	if d := getS(it, "details"); d != "" {
		if err := json.Unmarshal([]byte(d), &ev.Details); err != nil {
			return ev, fmt.Errorf("dynamodb: audit %s details: %w", ev.ID, err)
		}
	}
	return ev, nil
}
