package dynamodb

import (
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// expr accumulates an update and a condition expression with placeholders
// for every attribute name (many, like "ttl", are reserved words) and value.
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
	byName map[string]string
	set    []string
	add    []string
	remove []string
	cond   []string
}

func newExpr() *expr {
	return &expr{names: map[string]string{}, values: map[string]types.AttributeValue{}, byName: map[string]string{}}
}

func (e *expr) name(attr string) string {
	if p, ok := e.byName[attr]; ok {
		return p
	}
	p := "#n" + strconv.Itoa(len(e.byName))
	e.byName[attr] = p
	e.names[p] = attr
	return p
}

func (e *expr) value(v types.AttributeValue) string {
	p := ":v" + strconv.Itoa(len(e.values))
	e.values[p] = v
	return p
}

func (e *expr) setN(attr string, v int64) { e.setV(attr, num(v)) }
func (e *expr) setV(attr string, v types.AttributeValue) {
	e.set = append(e.set, e.name(attr)+" = "+e.value(v))
}
func (e *expr) addN(attr string, v int64) { e.add = append(e.add, e.name(attr)+" "+e.value(num(v))) }

// where adds a condition; in it, %s stands for the attribute and %v for the
// value, e.g. e.where("%s >= %v", attr, num(5)).
func (e *expr) where(format, attr string, v types.AttributeValue) {
	c := strings.Replace(format, "%s", e.name(attr), 1)
	if v != nil {
		c = strings.Replace(c, "%v", e.value(v), 1)
	}
	e.cond = append(e.cond, c)
}

func (e *expr) update() *string {
	var parts []string
	if len(e.set) > 0 {
		parts = append(parts, "SET "+strings.Join(e.set, ", "))
	}
	if len(e.add) > 0 {
		parts = append(parts, "ADD "+strings.Join(e.add, ", "))
	}
	if len(e.remove) > 0 {
		parts = append(parts, "REMOVE "+strings.Join(e.remove, ", "))
	}
	if len(parts) == 0 {
		return nil
	}
	s := strings.Join(parts, " ")
	return &s
}

func (e *expr) condition() *string {
	if len(e.cond) == 0 {
		return nil
	}
	s := strings.Join(e.cond, " AND ")
	return &s
}

func (e *expr) attrValues() map[string]types.AttributeValue {
	if len(e.values) == 0 {
		return nil
	}
	return e.values
}

// updateItem returns the UpdateItem of the item at key in table that e
// describes. With ret set, a write that succeeds returns the item as ret
// says, and one whose condition fails returns the item as it was
// (ALL_OLD): every caller that reads a result plans its next write from
// the item either way.
func (e *expr) updateItem(table *string, key item, ret types.ReturnValue) *dynamodb.UpdateItemInput {
	in := &dynamodb.UpdateItemInput{
		TableName:                 table,
		Key:                       key,
		UpdateExpression:          e.update(),
		ConditionExpression:       e.condition(),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.attrValues(),
	}
	if ret != "" {
		in.ReturnValues = ret
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	return in
}

// transactUpdate turns an UpdateItem into a transaction item; one that
// updates nothing becomes a check of its condition, which the transaction
// still depends on.
func transactUpdate(u *dynamodb.UpdateItemInput) types.TransactWriteItem {
	if u.UpdateExpression == nil {
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: u.TableName, Key: u.Key, ConditionExpression: u.ConditionExpression,
			ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
		}}
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
		ConditionExpression: u.ConditionExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
		ExpressionAttributeValues: u.ExpressionAttributeValues,
	}}
}
