package envoybench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"time"
)

// h1Conn is an HTTP/1.1 client of one keep-alive connection that posts
// the same request again and again, its bytes written once: as h2Conn is
// for gRPC, it keeps the load generator's CPU per call small (net/http's
// client spends about 30 µs per call here, most in its transport's
// goroutines and header maps). It reads the status line, the headers it
// needs (Content-Length, Transfer-Encoding, Connection) and the body,
// whole, into a reused buffer.
type h1Conn struct {
	conn net.Conn
	br   *bufio.Reader
	req  []byte
	body []byte
}

// dialH1 opens a connection to addr for POSTs of body (JSON) to path.
func dialH1(addr, path string, body []byte) (*h1Conn, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	req := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		path, addr, len(body))
	return &h1Conn{conn: conn, br: bufio.NewReaderSize(conn, 16<<10), req: append(req, body...)}, nil
}

func (c *h1Conn) Close() error { return c.conn.Close() }

// call posts the request and returns the answer's status and body (valid
// until the next call).
func (c *h1Conn) call() (int, []byte, error) {
	if _, err := c.conn.Write(c.req); err != nil {
		return 0, nil, err
	}
	line, err := c.line()
	if err != nil {
		return 0, nil, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, fmt.Errorf("status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, fmt.Errorf("status line %q", line)
	}
	length, chunked, closing := -1, false, false
	for {
		line, err := c.line()
		if err != nil {
			return 0, nil, err
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, nil, fmt.Errorf("header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "Content-Length"):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, nil, fmt.Errorf("Content-Length %q", value)
			}
		case asciiEqualFold(name, "Transfer-Encoding"):
			chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "Connection"):
			closing = asciiEqualFold(value, "close")
		}
	}
	c.body = c.body[:0]
	switch {
	case chunked:
		err = c.chunks()
	case length >= 0:
		err = c.read(length)
	default:
		return 0, nil, errors.New("an answer without a length")
	}
	if err == nil && closing {
		err = errors.New("the server closes the connection")
	}
	return status, c.body, err
}

// read appends n bytes of the body.
func (c *h1Conn) read(n int) error {
	start := len(c.body)
	c.body = slices.Grow(c.body, n)[:start+n]
	_, err := io.ReadFull(c.br, c.body[start:])
	return err
}

// chunks reads a chunked body and its (empty or ignored) trailers.
func (c *h1Conn) chunks() error {
	for {
		line, err := c.line()
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(line, []byte(";"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("chunk size %q", line)
		}
		if n == 0 {
			for {
				line, err := c.line()
				if err != nil || len(line) == 0 {
					return err
				}
			}
		}
		if err := c.read(int(n)); err != nil {
			return err
		}
		if line, err := c.line(); err != nil || len(line) != 0 {
			return fmt.Errorf("chunk of %d bytes not followed by CRLF: %q, %v", n, line, err)
		}
	}
}

// line reads one line, without its CRLF (valid until the next read).
func (c *h1Conn) line() ([]byte, error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(line[:len(line)-1], []byte("\r")), nil
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
