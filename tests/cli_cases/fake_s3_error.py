# An HTTP server on loopback that answers every request with one S3 error
# (the XML body S3 sends), to see how rcpt prints it: s3_hints.case.
# Usage: python3 fake_s3_error.py CODE PORT_FILE
import http.server
import sys

CODE = sys.argv[1]
STATUS = {"NoSuchBucket": 404, "InvalidAccessKeyId": 403, "SignatureDoesNotMatch": 403,
          "AccessDenied": 403}[CODE]


class Handler(http.server.BaseHTTPRequestHandler):
    def answer(self):
        body = ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code>'
                '<Message>from the test server</Message></Error>' % CODE).encode()
        self.send_response(STATUS)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = answer

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
server.timeout = 10
with open(sys.argv[2], "w") as f:
    f.write(str(server.server_address[1]))
for _ in range(50):
    server.handle_request()
