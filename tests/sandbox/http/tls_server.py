"""A TLS server on 127.0.0.1 for the HTTP client's tests (client_test.cpp).

  tls_server.py CERT KEY RECORD

Prints the port it listens on, then handshakes each connection with CERT/KEY, appends the
request's head to RECORD (each followed by a NUL byte) and answers 200 "hello". A failed
handshake is closed. Exits when its stdin closes: the test that started it is done.
"""
import os
import socket
import ssl
import sys
import threading


def main() -> None:
    cert, key, record = sys.argv[1:4]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    print(srv.getsockname()[1], flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    while True:
        conn, _ = srv.accept()
        conn.settimeout(5)  # no read or write of this server blocks longer
        try:
            with ctx.wrap_socket(conn, server_side=True) as tls:
                req = b""
                while b"\r\n\r\n" not in req:
                    chunk = tls.recv(4096)
                    if not chunk:
                        break
                    req += chunk
                with open(record, "ab") as f:
                    f.write(req + b"\0")
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                            b"Connection: close\r\n\r\nhello")
                try:
                    tls.unwrap()
                except (ssl.SSLError, OSError):
                    pass
        except (ssl.SSLError, OSError):
            conn.close()


if __name__ == "__main__":
    main()
