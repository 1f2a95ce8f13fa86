# Steps pipelined through `rcpt gate mcp` (N steps, DEPTH in flight): answered/s and
# finished/s (the pending directory empty). python3 benches/probe/mcp_pipelined.py RCPT N DEPTH [WRAPPER...]
import json, os, subprocess, sys, time, tempfile, shutil
HERE = os.path.dirname(os.path.abspath(__file__))
rcpt = sys.argv[1]; n = int(sys.argv[2]); depth = int(sys.argv[3])
d = tempfile.mkdtemp(dir=os.environ.get("PROBE_DIR","/tmp")); os.chdir(d)
run = lambda *a: subprocess.run([rcpt, *a], check=True, capture_output=True)
run("key","generate","--name","gate.example/bench","--out","gate")
run("key","generate","--name","log.example/bench","--out","logkey")
run("log","init","log","--origin","log.example/bench","--key","logkey.key")
os.mkdir("work"); open("work/f.txt","w").write("0")
obj={"type":"object"}
json.dump([{"name":"read","inputSchema":obj,"annotations":{"readOnlyHint":True}},{"name":"write","inputSchema":obj}], open("tools.json","w"))
srv=["python3",os.path.join(HERE, "../../tests/mcp/fake_server.py"),d+"/tools.json","-"]
table=json.loads(subprocess.run([rcpt,"gate","mcp","pin","--",*srv],check=True,capture_output=True).stdout)
table["tools"]["write"]["files"]=["/path"]
json.dump({"name":"bench","substrate":"tool-proxy","server":{"name":"fake"},"tools":table["tools"]},open("policy.json","w"))
p=subprocess.Popen([*sys.argv[4:], rcpt,"gate","mcp","--policy","policy.json","--key","gate.key","--store","store","--root","work","--log","log","--",*srv],stdin=subprocess.PIPE,stdout=subprocess.PIPE,stderr=subprocess.DEVNULL)
f=d+"/work/f.txt"
msg=lambda i: (json.dumps({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"write","arguments":{"path":f,"content":"t%d"%i}}})+"\n").encode()
p.stdin.write(msg(0)); p.stdin.flush(); p.stdout.readline()
t0=time.perf_counter(); sent=0; got=0
while got < n:
    while sent < n and sent-got < depth:
        p.stdin.write(msg(sent+1)); sent+=1
    p.stdin.flush()
    r=json.loads(p.stdout.readline()); got+=1
    assert "error" not in r, r
ta=time.perf_counter()-t0
while os.listdir(d+"/store/mcp/pending"): time.sleep(0.002)
tf=time.perf_counter()-t0
print("answered %.0f/s finished %.0f/s" % (n/ta, n/tf))
p.stdin.close(); p.wait(); shutil.rmtree(d)
