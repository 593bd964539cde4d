// Command squatter stands in for another local user in tamq's security
// tests. `squatter SOCKET` binds a Unix socket at a path before the user's
// service can, lets anyone connect, and reports how many bytes each
// connection sent it ("conn N" on stdout), so a test can show that a client
// refused it before writing a byte. `squatter dial SOCKET [FRAME]` connects
// to a service as a raw client would, without the checks tamq's own client
// makes, sends FRAME (a ping by default) and prints the first reply ("reply
// ..." or "closed"). `squatter tcp ADDR` listens on a TCP address instead, as
// another user who binds State Hub's port while it is not running, and says
// "ready HOST:PORT" once it listens.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

func main() {
	switch {
	case len(os.Args) == 3 && os.Args[1] == "tcp":
		ln, err := net.Listen("tcp", os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "squatter:", err)
			os.Exit(1)
		}
		fmt.Println("ready", ln.Addr())
		count(ln)
	case len(os.Args) == 2:
		squat(os.Args[1])
	case len(os.Args) == 3 && os.Args[1] == "dial":
		dial(os.Args[2], `{"proto":"0.1","op":"ping","id":"squatter"}`)
	case len(os.Args) == 4 && os.Args[1] == "dial":
		dial(os.Args[2], os.Args[3])
	default:
		fmt.Fprintln(os.Stderr, "usage: squatter SOCKET | squatter tcp ADDR | squatter dial SOCKET [FRAME]")
		os.Exit(2)
	}
}

func squat(path string) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "squatter:", err)
		os.Exit(1)
	}
	os.Chmod(path, 0o777) // anyone may connect: the victim must refuse by itself
	fmt.Println("ready")
	count(ln)
}

// count reports, for each connection, how many bytes it sent.
func count(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() {
			defer c.Close()
			// A client that goes on after connecting writes its request at
			// once; one that refused closes without a byte.
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, _ := io.Copy(io.Discard, c)
			fmt.Printf("conn %d\n", n)
		}()
	}
}

func dial(path, frame string) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "squatter:", err)
		os.Exit(1)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "%s\n", frame)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		fmt.Println("closed")
		return
	}
	fmt.Print("reply ", line)
}
