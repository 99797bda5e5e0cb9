package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// MaxValueSize bounds one value of a stream Run reads, in bytes: a value
// at its top level, or an element of an array there. It is Lambda's limit
// on an invocation's payload, so that an SQS batch as Lambda hands it
// fits; an event inside is still bounded by MaxEventSize.
const MaxValueSize = 6 << 20

// Run handles the events of the stream of JSON values read from r, until r
// ends or ctx does: values separated by white space or none, one per line
// or several, each on a line or spread over many (pretty-printed). Each
// value is what HandleValue takes: an event, an SQS message or batch, or
// an array of those, whose elements are read one at a time, so that an
// array of any length needs no more memory than its largest element (its
// commas are not checked: elements apart by white space alone are read
// too).
//
// A value that holds no event is counted Malformed, logged, and the stream
// goes on. A value that is not JSON cannot be skipped by its structure: it
// is counted Malformed once, logged with the byte offset of the error, and
// reading resumes on the next line, so that one bad line of a stream of
// one value per line costs that line alone. Inside a value spread over
// several lines, the lines after the error may be read as values of their
// own, each counted (a damaged pretty-printed event is more than one
// malformed value). A value longer than MaxValueSize is skipped the same
// way, from the line where reading stopped; one cut off by the end of the
// stream is one malformed value.
//
// Run returns r's error, or ctx's; nil when r ends.
func (p *Processor) Run(ctx context.Context, r io.Reader) error {
	in := &input{src: r, limit: math.MaxInt64}
	inArray := false
	for ctx.Err() == nil {
		c, err := in.peek()
		if errors.Is(err, io.EOF) {
			if inArray {
				p.malformed("", errors.New("the stream ends inside an array"))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("events: read: %w", err)
		}
		// The brackets and commas of an array at the top level are read
		// here, and its elements as values of their own, so that an error
		// in one element resumes inside the array rather than after it.
		switch {
		case c == '[' && !inArray, c == ']' && inArray, c == ',' && inArray:
			in.rest = in.rest[1:]
			inArray = c == '[' || c == ','
			continue
		}
		raw, bad, err := in.value()
		switch {
		case err != nil:
			return fmt.Errorf("events: read: %w", err)
		case bad != nil:
			p.malformed("", bad)
		default:
			p.value(ctx, raw, inArray, func(Result) {})
		}
	}
	return ctx.Err()
}

// errTooLarge is input's read error past the bound of a value.
var errTooLarge = errors.New("value too large")

// input is the stream Run reads, as the decoder of each value reads it:
// first rest, the bytes a previous decoder read past its value (or a peek
// read ahead), then src, of which it hands out no more than up to limit
// (an offset in src), so that a value cannot grow without bound.
type input struct {
	rest  []byte
	src   io.Reader
	read  int64 // bytes read from src
	limit int64
}

// Read implements io.Reader for the decoders.
func (in *input) Read(p []byte) (int, error) {
	if len(in.rest) > 0 {
		n := copy(p, in.rest)
		in.rest = in.rest[n:]
		return n, nil
	}
	if in.read >= in.limit {
		return 0, errTooLarge
	}
	if room := in.limit - in.read; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := in.src.Read(p)
	in.read += int64(n)
	return n, err
}

// offset is the offset in the stream of the next byte Read returns.
func (in *input) offset() int64 { return in.read - int64(len(in.rest)) }

// fillSize is how much a peek or a skip reads from src at once.
const fillSize = 4 << 10

// fill reads more of src into rest, which is empty.
func (in *input) fill() error {
	buf := make([]byte, fillSize)
	n, err := in.src.Read(buf)
	in.read += int64(n)
	in.rest = buf[:n]
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress // a reader that returns nothing, again and again
	}
	return err
}

// peek skips white space and returns the byte after it, left in rest;
// io.EOF at the end of the stream.
func (in *input) peek() (byte, error) {
	for {
		in.rest = bytes.TrimLeft(in.rest, " \t\r\n")
		if len(in.rest) > 0 {
			return in.rest[0], nil
		}
		if err := in.fill(); err != nil {
			return 0, err
		}
	}
}

// value reads the next JSON value with a decoder of its own. A value that
// is not JSON, or too large, or cut off by the end of the stream, is bad,
// and the rest of the line where it failed is skipped; err is src's
// error.
func (in *input) value() (raw json.RawMessage, bad, err error) {
	start := in.offset()
	in.limit = start + MaxValueSize
	dec := json.NewDecoder(in)
	derr := dec.Decode(&raw)
	in.limit = math.MaxInt64
	left, _ := io.ReadAll(dec.Buffered()) // read from in, not used by the decoder
	at := in.offset() - int64(len(left))  // the offset of left[0]
	var syntax *json.SyntaxError
	switch {
	case derr == nil:
		in.rest = append(left, in.rest...)
		return raw, nil, nil
	case errors.As(derr, &syntax):
		// The decoder is new and this is its first value, which starts
		// at left[0]: the error's offset counts from there, one past the
		// byte the decoder stopped at.
		i := min(max(int(syntax.Offset)-1, 0), len(left))
		return nil, fmt.Errorf("not JSON at byte %d: %w", at+int64(i), derr), in.skipLine(left[i:])
	case errors.Is(derr, errTooLarge):
		return nil, fmt.Errorf("a value at byte %d larger than %d bytes", start, MaxValueSize), in.skipLine(nil)
	case errors.Is(derr, io.ErrUnexpectedEOF), errors.Is(derr, io.EOF):
		return nil, fmt.Errorf("the stream ends inside the value at byte %d", start), nil
	}
	return nil, nil, derr
}

// skipLine skips the rest of the line that b begins in, b being read
// already and what is left of it put back; the line may go on past b, in
// rest and src, for as long as it does.
func (in *input) skipLine(b []byte) error {
	if j := bytes.IndexByte(b, '\n'); j >= 0 {
		in.rest = append(b[j+1:], in.rest...)
		return nil
	}
	for {
		if j := bytes.IndexByte(in.rest, '\n'); j >= 0 {
			in.rest = in.rest[j+1:]
			return nil
		}
		in.rest = nil
		if err := in.fill(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}
