package client

import (
	"context"
	"io"
	"net/http"

	"github.com/tollgate-rl/tollgate/api"
)

// Backup writes a consistent copy of the server's store file to w (GET
// /v1/backup, with an admin key of every namespace), taken while the
// server serves, and returns its size. Only a server over an embedded
// store serves one: others answer an error matching
// api.ErrBackupUnsupported. The client's timeout does not
// bound it (a large file takes minutes: the server gives it
// server.BackupTimeout); ctx may. An answer cut short is an error, and w
// then holds part of a copy: check the copy before keeping it
// (store/embedded.WriteBackupFile does). It is never sent again.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	req := request{method: http.MethodGet, path: api.BackupPath}
	hreq, err := c.newRequest(ctx, req)
	if err != nil {
		return 0, err
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return 0, unreachable(req.op(), err)
	}
	defer closeBody(resp.Body)
	if resp.StatusCode != http.StatusOK {
		body, err := readBody(resp.Body)
		if err != nil {
			return 0, unreachable(req.op(), err)
		}
		return 0, decodeResponse(resp.StatusCode, resp.Header, body, nil)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, unreachable(req.op(), err) // the answer broke off
	}
	return n, nil
}
