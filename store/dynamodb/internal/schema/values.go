package schema

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Item is an item of the DynamoDB API.
type Item = map[string]types.AttributeValue

// Num is a number attribute value.
func Num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// Str is a string attribute value.
func Str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// Bool is a boolean attribute value.
func Bool(v bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: v} }

// GetS returns the string attribute name of it, or "" if it has none.
func GetS(it Item, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// GetN returns the number attribute name of it; it fails if the attribute
// is missing, not a number, or not an int64.
func GetN(it Item, name string) (int64, error) {
	v, ok := it[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("dynamodb: attribute %s missing or not a number", name)
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("dynamodb: attribute %s: %w", name, err)
	}
	return n, nil
}

// GetBool returns the boolean attribute name of it, false if it has none.
func GetBool(it Item, name string) bool {
	v, ok := it[name].(*types.AttributeValueMemberBOOL)
	return ok && v.Value
}
