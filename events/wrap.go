package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// The shapes a JSON value may have (package doc): an event; an array of
// events; an SQS message whose body is an event, as Lambda hands it
// (messageId, body) or as ReceiveMessage returns it (MessageId, Body); a
// batch of SQS messages, as Lambda hands it ({"Records": [...]}) or as
// ReceiveMessage returns it ({"Messages": [...]}).

// HandleValue decides every event one JSON value holds, in order, and
// returns their results: one for an event, one per element of an array,
// one per message of an SQS batch. A value that is neither an event nor one
// of the wrappers, and each element or message of a wrapper that holds no
// event, is one Malformed result. Each is counted and logged as by Handle.
func (p *Processor) HandleValue(ctx context.Context, raw []byte) []Result {
	var out []Result
	p.value(ctx, raw, false, func(r Result) { out = append(out, r) })
	return out
}

// value decides the events of raw; nested is true for an element of an
// array, which may not be an array itself.
func (p *Processor) value(ctx context.Context, raw []byte, nested bool, emit func(Result)) {
	switch c := firstByte(raw); {
	case c == '{':
		p.object(ctx, raw, emit)
	case c == '[' && !nested:
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			emit(p.malformed("", fmt.Errorf("not JSON: %w", err)))
			return
		}
		for _, e := range elems {
			p.value(ctx, e, true, emit)
		}
	case c == '[':
		emit(p.malformed("", errors.New("an array inside an array, not an event")))
	default:
		emit(p.malformed("", fmt.Errorf("not an event: %s", kindOf(c))))
	}
}

// object decides an event, or the events of an SQS message or batch.
func (p *Processor) object(ctx context.Context, raw []byte, emit func(Result)) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		emit(p.malformed("", fmt.Errorf("not JSON: %w", err)))
		return
	}
	_, isEvent := obj["source"]
	switch {
	case isEvent:
		emit(p.Handle(ctx, raw))
	case obj["Records"] != nil:
		p.messages(ctx, obj["Records"], emit)
	case obj["Messages"] != nil:
		p.messages(ctx, obj["Messages"], emit)
	case obj["body"] != nil || obj["Body"] != nil:
		emit(p.message(ctx, obj))
	default:
		emit(p.malformed("", errors.New("neither an EventBridge event (no source) nor an SQS message (no body)")))
	}
}

// messages decides the messages of an SQS batch.
func (p *Processor) messages(ctx context.Context, list json.RawMessage, emit func(Result)) {
	var msgs []json.RawMessage
	if err := json.Unmarshal(list, &msgs); err != nil {
		emit(p.malformed("", errors.New("an SQS batch whose records are not an array")))
		return
	}
	for _, m := range msgs {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(m, &obj); err != nil {
			emit(p.malformed("", fmt.Errorf("an SQS batch record that is not an object: %w", err)))
			continue
		}
		emit(p.message(ctx, obj))
	}
}

// message decides the event an SQS message's body holds.
func (p *Processor) message(ctx context.Context, obj map[string]json.RawMessage) Result {
	id := stringField(obj, "messageId", "MessageId")
	if src := stringField(obj, "eventSource"); src != "" && src != "aws:sqs" {
		return p.malformed(id, fmt.Errorf("a record from %s, not an SQS message", src))
	}
	body, ok := "", false
	for _, k := range []string{"body", "Body"} {
		if v, found := obj[k]; found {
			ok = json.Unmarshal(v, &body) == nil
			break
		}
	}
	if !ok {
		return p.malformed(id, errors.New("an SQS message without a string body"))
	}
	res := p.handle(ctx, []byte(body))
	res.MessageID = id
	if res.Outcome == Malformed {
		res.Err = fmt.Errorf("the SQS message's body: %w", res.Err)
	}
	return p.record(res)
}

// malformed counts and logs a value that holds no event.
func (p *Processor) malformed(messageID string, err error) Result {
	return p.record(Result{Outcome: Malformed, MessageID: messageID, Err: err})
}

// stringField returns the first of keys that holds a string in obj.
func stringField(obj map[string]json.RawMessage, keys ...string) string {
	for _, k := range keys {
		var s string
		if v, ok := obj[k]; ok && json.Unmarshal(v, &s) == nil {
			return s
		}
	}
	return ""
}

// firstByte returns the first byte of raw that is not white space, 0 if
// none.
func firstByte(raw []byte) byte {
	if raw = bytes.TrimLeft(raw, " \t\r\n"); len(raw) > 0 {
		return raw[0]
	}
	return 0
}

// kindOf names the JSON value that starts with c.
func kindOf(c byte) string {
	switch {
	case c == '"':
		return "a JSON string"
	case c == 't' || c == 'f':
		return "a JSON boolean"
	case c == 'n':
		return "JSON null"
	case c == '-' || c >= '0' && c <= '9':
		return "a JSON number"
	}
	return "not JSON"
}
