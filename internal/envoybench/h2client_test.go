package envoybench

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Conn is a gRPC client of one connection that makes one unary call at a
// time with the same request, written straight onto HTTP/2 frames: the
// load generator shares the machine's cores with the services it
// measures, so the less CPU it spends per call, the more of the machine
// the services' differences show in (grpc-go's client spends about 25 µs
// of CPU per call here, mostly in its transport's goroutines and
// buffers). It speaks what a gRPC server expects of a client: the
// connection preface and SETTINGS, the request's headers (encoded once
// with HPACK indexing, then sent as the indexes grpc-go's own client would
// send), a DATA frame of the length-prefixed message, flow control both
// ways, and answers to SETTINGS and PING. It reads the answer's headers,
// message and trailers, and fails a call whose grpc-status is not 0.
type h2Conn struct {
	conn    net.Conn
	bw      *bufio.Writer
	fr      *http2.Framer
	dec     *hpack.Decoder
	headers []byte // the request's header block, all indexed
	first   []byte // the first request's, which adds them to the server's table
	msg     []byte // the request: gRPC's 5-byte prefix and the message
	stream  uint32 // the last stream's id

	pings      int   // PINGs the server sent (answered)
	sendWindow int64 // the connection's send window (the server's grants)
	received   int64 // bytes of DATA received since the last WINDOW_UPDATE

	// Of the call in flight:
	status   string // grpc-status of the trailers
	message  string // grpc-message
	httpCode string // :status
	resp     []byte // DATA received
	done     bool
}

// recvWindow is the window this client grants the server, for the
// connection and each stream: calls' answers never fill it, and the
// connection's is granted again once half is used.
const recvWindow = 1 << 30

// dialH2 opens a connection to a gRPC server at addr for calls of method
// with the request req (its wire bytes).
func dialH2(addr, method string, req []byte) (*h2Conn, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c := &h2Conn{conn: conn, bw: bufio.NewWriterSize(conn, 16<<10), sendWindow: 65535}
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(conn, 16<<10))
	c.fr.SetReuseFrames()
	c.dec = hpack.NewDecoder(4096, c.header)

	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	fields := []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: method},
		{Name: ":authority", Value: addr}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}
	for i := range 2 {
		hb.Reset()
		for _, f := range fields {
			if err := enc.WriteField(f); err != nil {
				return nil, err
			}
		}
		if i == 0 {
			c.first = bytes.Clone(hb.Bytes())
		}
	}
	c.headers = bytes.Clone(hb.Bytes())
	c.msg = binary.BigEndian.AppendUint32([]byte{0}, uint32(len(req)))
	c.msg = append(c.msg, req...)

	if _, err := c.bw.WriteString(http2.ClientPreface); err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: recvWindow}); err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.fr.WriteWindowUpdate(0, recvWindow-65535); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

func (c *h2Conn) Close() error { return c.conn.Close() }

// header records the answer's header fields that the call checks.
func (c *h2Conn) header(f hpack.HeaderField) {
	switch f.Name {
	case ":status":
		c.httpCode = f.Value
	case "grpc-status":
		c.status = f.Value
	case "grpc-message":
		c.message = f.Value
	}
}

// call sends the request on a new stream and returns the answer's message
// (valid until the next call).
func (c *h2Conn) call() ([]byte, error) {
	if c.stream == 0 {
		c.stream = 1
	} else {
		c.stream += 2
	}
	block := c.headers
	if c.stream == 1 {
		block = c.first
	}
	c.status, c.message, c.httpCode, c.resp, c.done = "", "", "", c.resp[:0], false
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: c.stream, BlockFragment: block, EndHeaders: true}); err != nil {
		return nil, err
	}
	for c.sendWindow < int64(len(c.msg)) {
		if err := c.bw.Flush(); err != nil {
			return nil, err
		}
		if err := c.readFrame(); err != nil {
			return nil, err
		}
	}
	c.sendWindow -= int64(len(c.msg))
	if err := c.fr.WriteData(c.stream, true, c.msg); err != nil {
		return nil, err
	}
	if err := c.bw.Flush(); err != nil {
		return nil, err
	}
	for !c.done {
		if err := c.readFrame(); err != nil {
			return nil, err
		}
	}
	if c.received > recvWindow/2 {
		if err := c.fr.WriteWindowUpdate(0, uint32(c.received)); err != nil {
			return nil, err
		}
		c.received = 0
	}
	switch {
	case c.httpCode != "200":
		return nil, fmt.Errorf("HTTP status %q", c.httpCode)
	case c.status != "0":
		return nil, fmt.Errorf("grpc-status %s: %s", c.status, c.message)
	case len(c.resp) < 5 || c.resp[0] != 0 || int(binary.BigEndian.Uint32(c.resp[1:5])) != len(c.resp)-5:
		return nil, fmt.Errorf("answer of %d bytes is not one uncompressed message", len(c.resp))
	}
	return c.resp[5:], nil
}

// readFrame reads one frame and does what it asks.
func (c *h2Conn) readFrame() error {
	f, err := c.fr.ReadFrame()
	if err != nil {
		return err
	}
	switch f := f.(type) {
	case *http2.HeadersFrame:
		if _, err := c.dec.Write(f.HeaderBlockFragment()); err != nil {
			return err
		}
		if f.HeadersEnded() {
			if err := c.dec.Close(); err != nil {
				return err
			}
		}
		c.done = c.done || f.StreamEnded() && f.StreamID == c.stream
	case *http2.ContinuationFrame:
		if _, err := c.dec.Write(f.HeaderBlockFragment()); err != nil {
			return err
		}
		if f.HeadersEnded() {
			if err := c.dec.Close(); err != nil {
				return err
			}
		}
	case *http2.DataFrame:
		c.received += int64(f.Length)
		if f.StreamID == c.stream {
			c.resp = append(c.resp, f.Data()...)
		}
		c.done = c.done || f.StreamEnded() && f.StreamID == c.stream
	case *http2.SettingsFrame:
		if !f.IsAck() {
			return c.flushed(c.fr.WriteSettingsAck())
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			c.pings++
			return c.flushed(c.fr.WritePing(true, f.Data))
		}
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.sendWindow += int64(f.Increment)
		}
	case *http2.RSTStreamFrame:
		// grpc-go's server resets a stream with NO_ERROR when it has
		// answered before its reader saw the request's END_STREAM; the
		// reset may come after the answer, even after the next call
		// began.
		if f.StreamID != c.stream || f.ErrCode == http2.ErrCodeNo && c.done {
			return nil
		}
		return fmt.Errorf("stream %d reset: %v", f.StreamID, f.ErrCode)
	case *http2.GoAwayFrame:
		return fmt.Errorf("GOAWAY %v: %s", f.ErrCode, f.DebugData())
	}
	return nil
}

func (c *h2Conn) flushed(err error) error {
	if err != nil {
		return err
	}
	return c.bw.Flush()
}
