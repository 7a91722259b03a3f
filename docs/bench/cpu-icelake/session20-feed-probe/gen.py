# generate asm k loops for tiles mr x nv (vectors of 8 f64); B row = nv vectors; A = mr broadcasts.
import sys
def loop(mr, nv, name):
    regs_b = list(range(nv))
    bc = [nv, nv+1] if mr*nv+nv+2 <= 32 else [nv]
    acc0 = nv+len(bc)
    assert acc0+mr*nv <= 32, (mr,nv)
    lines = ["1:"]
    for v in range(nv): lines.append(f"vmovapd {64*v}(%[b]),%%zmm{v}")
    for i in range(mr):
        r = bc[i % len(bc)]
        lines.append(f"vbroadcastsd {8*i}(%[a]),%%zmm{r}")
        for v in range(nv):
            lines.append(f"vfmadd231pd %%zmm{v},%%zmm{r},%%zmm{acc0+i*nv+v}")
    lines += [f"add ${8*mr},%[a]", f"add ${64*nv},%[b]", "dec %[n]", "jnz 1b"]
    body = "\\n\"\n\"".join(lines)
    clob = ",".join(f'"zmm{r}"' for r in range(32))
    return f'''static void {name}(const double* a,const double* b,long n){{ __asm__ volatile("{body}\\n" : [a]"+r"(a),[b]"+r"(b),[n]"+r"(n) :: "memory",{clob}); }}
'''
tiles = [(8,3),(6,4),(5,5),(4,6),(9,3),(12,2)]
out = ['#include "harness.h"']
for mr,nv in tiles: out.append(loop(mr,nv,f"k{mr}x{nv}"))
out.append("static struct { const char* name; void (*f)(const double*,const double*,long); int mr, nv; } V[] = {")
for mr,nv in tiles: out.append(f'{{"{mr}x{nv*8}", k{mr}x{nv}, {mr}, {nv}}},')
out.append("};\n#define NV (int)(sizeof V/sizeof V[0])\n#include \"main.h\"")
open("tiles.c","w").write("\n".join(out))
