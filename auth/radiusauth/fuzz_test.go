package radiusauth

import (
	"crypto/hmac"
	"crypto/md5"
	"encoding/binary"
	"testing"

	"layeh.com/radius"
	"layeh.com/radius/rfc2869"
)

// FuzzParseResponse feeds datagrams to the response check, which reads
// whatever arrives on the socket: it must not panic, and what it takes
// must be signed with the secret.
func FuzzParseResponse(f *testing.F) {
	b, err := New(Config{Server: "127.0.0.1", Secret: []byte("s3cret")})
	if err != nil {
		f.Fatal(err)
	}
	req, err := b.request("alice", "wonderland")
	if err != nil {
		f.Fatal(err)
	}
	reqPacket, err := radius.Parse(req, b.secret)
	if err != nil {
		f.Fatal(err)
	}
	// Seeds: an Access-Accept with and without Message-Authenticator.
	for _, withMA := range []bool{false, true} {
		p := reqPacket.Response(radius.CodeAccessAccept)
		if withMA {
			p.Add(rfc2869.MessageAuthenticator_Type, make([]byte, md5.Size))
			raw, err := p.MarshalBinary()
			if err != nil {
				f.Fatal(err)
			}
			mac := hmac.New(md5.New, b.secret)
			mac.Write(raw)
			p.Attributes[0].Attribute = mac.Sum(nil)
		}
		wire, err := p.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(wire)
	}
	f.Add([]byte{2, req[1], 0, 20})
	f.Fuzz(func(t *testing.T, resp []byte) {
		p, err := b.parseResponse(resp, req)
		if err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(resp[2:4]))
		if p == nil || !radius.IsAuthenticResponse(resp[:n], req, b.secret) {
			t.Fatalf("parseResponse took %x, which is not signed with the secret", resp)
		}
	})
}
