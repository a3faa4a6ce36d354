// Generated from src/engine/model/kernels/native_abi.ts (npx tsx src/engine/model/kernels/native_abi.ts --write); do not edit.
// Each native kernel's int32 arguments, by name in call order: KERNEL_ARGS(name) in common.h reads them into a name##_args.
#pragma once
#include <stdint.h>

#define NATIVE_MAX_ARGS 14

typedef struct { int32_t logits, targets, N, V, logp, lse; } logprob_args;
enum { logprob_nargs = 6 };
_Static_assert(sizeof(logprob_args) == 6 * sizeof(int32_t), "logprob_args has no padding");
typedef struct { int32_t logits, targets, lse, dy, out, N, V; } logprobGrad_args;
enum { logprobGrad_nargs = 7 };
_Static_assert(sizeof(logprobGrad_args) == 7 * sizeof(int32_t), "logprobGrad_args has no padding");
typedef struct { int32_t x, w, y, rinv, N, d, epsBits; } rmsnorm_args;
enum { rmsnorm_nargs = 7 };
_Static_assert(sizeof(rmsnorm_args) == 7 * sizeof(int32_t), "rmsnorm_args has no padding");
typedef struct { int32_t x, w, rinv, dy, dx, dw, N, d; } rmsnormGrad_args;
enum { rmsnormGrad_nargs = 8 };
_Static_assert(sizeof(rmsnormGrad_args) == 8 * sizeof(int32_t), "rmsnormGrad_args has no padding");
typedef struct { int32_t q, k, v, mask, p, o, B, H, Hkv, T, Tk, hd; } attention_args;
enum { attention_nargs = 12 };
_Static_assert(sizeof(attention_args) == 12 * sizeof(int32_t), "attention_args has no padding");
typedef struct { int32_t q, k, v, p, dO, dq, dk, dv, B, H, Hkv, T, Tk, hd; } attentionGrad_args;
enum { attentionGrad_nargs = 14 };
_Static_assert(sizeof(attentionGrad_args) == 14 * sizeof(int32_t), "attentionGrad_args has no padding");
typedef struct { int32_t qkv, cos, sin, q, k, v, B, T, H, Hkv, hd; } qkvHeads_args;
enum { qkvHeads_nargs = 11 };
_Static_assert(sizeof(qkvHeads_args) == 11 * sizeof(int32_t), "qkvHeads_args has no padding");
typedef struct { int32_t dq, dk, dv, cos, sin, dqkv, B, T, H, Hkv, hd; } qkvHeadsGrad_args;
enum { qkvHeadsGrad_nargs = 11 };
_Static_assert(sizeof(qkvHeadsGrad_args) == 11 * sizeof(int32_t), "qkvHeadsGrad_args has no padding");
typedef struct { int32_t gu, out, sig, N, F; } swiglu_args;
enum { swiglu_nargs = 5 };
_Static_assert(sizeof(swiglu_args) == 5 * sizeof(int32_t), "swiglu_args has no padding");
typedef struct { int32_t gu, sig, dy, out, N, F; } swigluGrad_args;
enum { swigluGrad_nargs = 6 };
_Static_assert(sizeof(swigluGrad_args) == 6 * sizeof(int32_t), "swigluGrad_args has no padding");
typedef struct { int32_t qkv, tabs, keys, values, mask, out, B, H, Hkv, hd, cap, pos; } decodeStep_args;
enum { decodeStep_nargs = 12 };
_Static_assert(sizeof(decodeStep_args) == 12 * sizeof(int32_t), "decodeStep_args has no padding");

// "name:arg,arg,…" per kernel: the addon exports these as abi, so the engine can check the build it loaded.
#define NATIVE_ABI_STRINGS \
  "logprob:logits,targets,N,V,logp,lse", \
  "logprobGrad:logits,targets,lse,dy,out,N,V", \
  "rmsnorm:x,w,y,rinv,N,d,epsBits", \
  "rmsnormGrad:x,w,rinv,dy,dx,dw,N,d", \
  "attention:q,k,v,mask,p,o,B,H,Hkv,T,Tk,hd", \
  "attentionGrad:q,k,v,p,dO,dq,dk,dv,B,H,Hkv,T,Tk,hd", \
  "qkvHeads:qkv,cos,sin,q,k,v,B,T,H,Hkv,hd", \
  "qkvHeadsGrad:dq,dk,dv,cos,sin,dqkv,B,T,H,Hkv,hd", \
  "swiglu:gu,out,sig,N,F", \
  "swigluGrad:gu,sig,dy,out,N,F", \
  "decodeStep:qkv,tabs,keys,values,mask,out,B,H,Hkv,hd,cap,pos"
