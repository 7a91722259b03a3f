int cmp(const void*x,const void*y){double a=*(double*)x,b=*(double*)y;return a<b?-1:a>b;}
int main(int argc,char**argv){
  for(int i=0;i<12*KC;i++)A[i]=1e-9; for(int i=0;i<48*KC;i++)B[i]=1e-9;
  int R=atoi(argv[1]); static double rs[16][201], rel[16][201];
  for(int r=0;r<R;r++) for(int v=0;v<NV;v++){ long calls=150000*24/(V[v].mr*V[v].nv);
    double t=now(); for(long c=0;c<calls;c++) V[v].f(A,B,KC); t=now()-t;
    rs[v][r]=calls*(double)V[v].mr*V[v].nv*8*KC*2/t/1e9; }
  for(int r=0;r<R;r++) for(int v=0;v<NV;v++) rel[v][r]=rs[v][r]/rs[0][r];
  for(int v=0;v<NV;v++){qsort(rs[v],R,sizeof(double),cmp);qsort(rel[v],R,sizeof(double),cmp);
    printf("%-6s median %.1f max %.1f  rel-to-first median %.3f\n",V[v].name,rs[v][R/2],rs[v][R-1],rel[v][R/2]);}
}
