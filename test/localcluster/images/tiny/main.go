// Command tiny is the whole of the local node's smallest images: the pod
// sandbox ("pause": wait for SIGTERM) and a test container that can print,
// name its host, sleep and exit with a code, so tests see what a real
// kubelet and runtime do with it. Static, no libc, no shell.
//
//	tiny [pause]        wait for SIGTERM or SIGINT, exit 0
//	tiny echo WORDS...  print the words
//	tiny hostname       print the host name
//	tiny sleep SECONDS  sleep, then exit 0
//	tiny exit CODE      exit with CODE
//	tiny lookup NAME    print NAME's addresses, from the pod's DNS
//	tiny listen PORT    accept TCP connections on PORT, answering each with the host name
//	tiny connect ADDR   connect to ADDR (host:port) within 3 s and print its answer
package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		args = []string{"pause"}
	}
	switch args[0] {
	case "pause":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
	case "echo":
		fmt.Println(strings.Join(args[1:], " "))
	case "hostname":
		h, err := os.Hostname()
		if err != nil {
			fail(err)
		}
		fmt.Println(h)
	case "sleep":
		s, err := strconv.ParseFloat(arg(args), 64)
		if err != nil {
			fail(err)
		}
		time.Sleep(time.Duration(s * float64(time.Second)))
	case "lookup":
		addrs, err := net.LookupHost(arg(args))
		if err != nil {
			fail(err)
		}
		fmt.Println(strings.Join(addrs, " "))
	case "listen":
		l, err := net.Listen("tcp", ":"+arg(args))
		if err != nil {
			fail(err)
		}
		h, _ := os.Hostname()
		for {
			conn, err := l.Accept()
			if err != nil {
				fail(err)
			}
			_, _ = fmt.Fprintln(conn, h)
			_ = conn.Close()
		}
	case "connect":
		conn, err := net.DialTimeout("tcp", arg(args), 3*time.Second)
		if err != nil {
			fail(err)
		}
		_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
		answer := make([]byte, 256)
		n, err := conn.Read(answer)
		if err != nil {
			fail(err)
		}
		fmt.Print(string(answer[:n]))
	case "exit":
		code, err := strconv.Atoi(arg(args))
		if err != nil {
			fail(err)
		}
		os.Exit(code)
	default:
		fail(fmt.Errorf("unknown command %q: pause, echo, hostname, sleep, exit, lookup, listen or connect", args[0]))
	}
}

func arg(args []string) string {
	if len(args) < 2 {
		fail(fmt.Errorf("%s needs an argument", args[0]))
	}
	return args[1]
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "tiny:", err)
	os.Exit(2)
}
