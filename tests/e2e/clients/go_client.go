// A Go HTTPS client, as a user's program would be (tests/e2e): net/http's
// default transport, which takes the proxy from HTTPS_PROXY and the roots
// from SSL_CERT_FILE.
//
// usage: go_client URL [NAME=ENVVAR]...
// Each NAME=ENVVAR adds the header NAME with the value of $ENVVAR.
// Prints "STATUS n" then the body, or "ERROR message" and exits 1.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	req, err := http.NewRequest("GET", os.ExpandEnv(os.Args[1]), nil)
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	for _, a := range os.Args[2:] {
		kv := strings.SplitN(a, "=", 2)
		req.Header.Set(kv[0], os.Getenv(kv[1]))
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Printf("STATUS %d\n", resp.StatusCode)
	os.Stdout.Write(body)
	if resp.StatusCode >= 400 {
		os.Exit(1)
	}
}
