package main

import (
	"maps"
	"slices"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// image adapts an item image of a Lambda DynamoDB stream record to
// dynamodb.Image. Attributes of another type than the one asked for read as
// absent (""), as the backend's own stream reader reads them; the
// aws-lambda-go accessors would panic instead.
type image map[string]events.DynamoDBAttributeValue

// imageOf returns m as a dynamodb.Image, or nil when the record has no such
// image (an INSERT has no old image, a REMOVE no new one).
func imageOf(m map[string]events.DynamoDBAttributeValue) dynamodb.Image {
	if m == nil {
		return nil
	}
	return image(m)
}

// S returns the string attribute name, or "".
func (m image) S(name string) string {
	if v, ok := m[name]; ok && v.DataType() == events.DataTypeString {
		return v.String()
	}
	return ""
}

// N returns the number attribute name as its decimal text, or "".
func (m image) N(name string) string {
	if v, ok := m[name]; ok && v.DataType() == events.DataTypeNumber {
		return v.Number()
	}
	return ""
}

// Names returns the names of every attribute, in no particular order.
func (m image) Names() []string { return slices.Collect(maps.Keys(m)) }
