# Lone write steps through `rcpt gate mcp` (reads first), one at a time: p50/p99 as
# the client sees them. python3 benches/probe/mcp_lone_steps.py RCPT NREADS NWRITES [WRAPPER...]
# (WRAPPER: e.g. `perf record -g -o F --` or `strace -f -c -o F --`); PROBE_DIR: where the world is made.
import json, os, subprocess, sys, time, tempfile, shutil
HERE = os.path.dirname(os.path.abspath(__file__))
rcpt = sys.argv[1]; nreads = int(sys.argv[2]); nwrites = int(sys.argv[3]); wrap = sys.argv[4:]  # e.g. strace ...
d = tempfile.mkdtemp(dir=os.environ.get("PROBE_DIR","/work/wt")); os.chdir(d)
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
p=subprocess.Popen([*wrap, rcpt,"gate","mcp","--policy","policy.json","--key","gate.key","--store","store","--root","work","--log","log","--",*srv],stdin=subprocess.PIPE,stdout=subprocess.PIPE)
def call(i,tool,args):
    p.stdin.write((json.dumps({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":tool,"arguments":args}})+"\n").encode()); p.stdin.flush()
    return json.loads(p.stdout.readline())
f=d+"/work/f.txt"
call(0,"read",{"path":f})
for i in range(nreads): call(i+1,"read",{"path":f})
ts=[]
for i in range(nwrites):
    t0=time.perf_counter(); r=call(10**6+i,"write",{"path":f,"content":str(i)}); ts.append(time.perf_counter()-t0)
    assert "error" not in r, r
ts.sort(); print("write p50 %.3f p99 %.3f ms"%(ts[len(ts)//2]*1e3, ts[int(len(ts)*.99)]*1e3))
p.stdin.close(); p.wait(); shutil.rmtree(d)
