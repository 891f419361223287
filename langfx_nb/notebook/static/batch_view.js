// langfx-src-sha256: a9ea2cfa3a922b9c759e4a38d438973b5fb46655f4f50ef0952f54667adcd1ad
// Built from js/src by js/build.mjs; do not edit.
var U=Object.defineProperty;var W=(e,t,n)=>t in e?U(e,t,{enumerable:!0,configurable:!0,writable:!0,value:n}):e[t]=n;var S=(e,t,n)=>W(e,typeof t!="symbol"?t+"":t,n);var v={EVENTS:"events",SNAPSHOT:"snapshot",SYNC:"sync",RENDERED:"rendered",DECISION:"decision",DECISION_RESULT:"decision_result",DETAIL_REQUEST:"detail_request",DETAIL:"detail",CANCEL:"cancel",OPEN_GROUP:"open_group",OPEN_TRACE:"open_trace",TRACE_OPENED:"trace_opened",WINDOW_REQUEST:"window_request",WINDOW:"window",SHOW:"show"};function r(e,t={},...n){let s=document.createElement(e);for(let[o,l]of Object.entries(t))l===void 0||l===!1||(o==="class"?s.className=String(l):o==="text"?s.textContent=String(l):s.setAttribute(o,l===!0?"":String(l)));for(let o of n)o==null||o===!1||s.append(typeof o=="string"?document.createTextNode(o):o);return s}function w(e){for(;e.firstChild;)e.removeChild(e.firstChild)}var V=`
.lfx{font:12px/1.4 var(--jp-ui-font-family,system-ui,sans-serif);color:var(--jp-ui-font-color1,#222);
  --lfx-ok:var(--jp-success-color1,#4caf50);--lfx-bad:var(--jp-error-color1,#f44336);--lfx-warn:var(--jp-warn-color1,#ff9800);
  --lfx-run:var(--jp-brand-color1,#2196f3);--lfx-paused:var(--jp-info-color1,#0097a7);--lfx-fg0:var(--jp-ui-font-color0,#000)}
.lfx .lfx-muted{color:var(--jp-ui-font-color2,#757575)}
.lfx .lfx-st{display:inline-block;box-sizing:border-box;min-width:72px;text-align:center;font-size:11px;line-height:16px;padding:0 6px;border-radius:8px;white-space:nowrap;
  color:var(--jp-ui-font-color1,#222);--lfx-c:var(--jp-border-color1,#bdbdbd);border:1px solid var(--lfx-c);background:color-mix(in srgb,var(--lfx-c) 22%,transparent)}
.lfx .lfx-st-running,.lfx .lfx-st-streaming{--lfx-c:var(--lfx-run)}
.lfx .lfx-st-ok,.lfx .lfx-st-complete,.lfx .lfx-st-done{--lfx-c:var(--lfx-ok)}
.lfx .lfx-st-failed,.lfx .lfx-st-timed_out,.lfx .lfx-st-generation_failed,.lfx .lfx-st-parsing_failed{--lfx-c:var(--lfx-bad)}
.lfx .lfx-st-denied,.lfx .lfx-st-cancelled,.lfx .lfx-st-ended{--lfx-c:var(--lfx-warn)}
.lfx .lfx-st-suspended{--lfx-c:var(--lfx-paused);border-style:dashed}
.lfx .lfx-st-waiting{--lfx-c:var(--lfx-paused)}
.lfx ul.lfx-json,.lfx ul.lfx-json>li{list-style:none;margin:0}
.lfx ul.lfx-json{padding-left:14px}
.lfx details.lfx-jd>summary{cursor:pointer;list-style:none}
.lfx details.lfx-jd>summary::-webkit-details-marker{display:none}
.lfx details.lfx-jd>summary::before{content:"\u25B8 ";color:var(--jp-ui-font-color1,#222)}
.lfx details.lfx-jd[open]>summary::before{content:"\u25BE "}
.lfx .lfx-key{color:var(--jp-ui-font-color2,#616161)}
.lfx .lfx-v-string{white-space:pre-wrap;word-break:break-word}
.lfx pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font-family:var(--jp-code-font-family,monospace);font-size:12px}
.lfx .lfx-err{color:color-mix(in srgb,var(--lfx-bad) 72%,var(--lfx-fg0));white-space:pre-wrap}
.lfx .lfx-btn,.lfx button{font:inherit;font-size:11px;margin:2px 4px 2px 0;padding:1px 8px;cursor:pointer;border-radius:4px;
  border:1px solid var(--jp-border-color1,#bdbdbd);background:var(--jp-layout-color1,#fff);color:var(--jp-ui-font-color1,#222)}
.lfx button:hover{background:var(--jp-layout-color2,#eee)}
.lfx button:disabled{opacity:.5;cursor:default}
.lfx button.lfx-primary{background:var(--jp-brand-color1,#2196f3);border-color:var(--jp-brand-color0,#1976d2);color:#fff;font-weight:600}
.lfx button.lfx-primary:hover{background:var(--jp-brand-color0,#1976d2)}
.lfx button.lfx-danger{background:transparent;border-color:var(--lfx-bad);color:color-mix(in srgb,var(--lfx-bad) 72%,var(--lfx-fg0))}
.lfx button.lfx-danger:hover{background:color-mix(in srgb,var(--lfx-bad) 15%,transparent)}
.lfx button.lfx-copy{padding:0 6px;font-size:10px;float:none}
.lfx .lfx-fold>button.lfx-more{margin-top:2px}
.lfx .lfx-chat{display:flex;flex-direction:column;gap:6px}
.lfx .lfx-msg{border:1px solid var(--jp-border-color2,#e0e0e0);border-left:3px solid var(--jp-border-color1,#bdbdbd);border-radius:4px;padding:4px 8px;background:var(--jp-layout-color1,#fff)}
.lfx .lfx-msg-system{border-left-color:var(--lfx-warn)}
.lfx .lfx-msg-user{border-left-color:var(--lfx-run)}
.lfx .lfx-msg-assistant,.lfx .lfx-msg-ai,.lfx .lfx-msg-model{border-left-color:var(--lfx-ok)}
.lfx .lfx-msg-result,.lfx .lfx-msg-tool{border-left-color:var(--jp-ui-font-color2,#757575)}
.lfx .lfx-msg-reasoning{border-left-style:dashed;border-left-color:var(--jp-ui-font-color2,#757575);color:var(--jp-ui-font-color2,#757575)}
.lfx .lfx-msg-call{margin-top:4px;background:var(--jp-layout-color2,#f5f5f5)}
.lfx .lfx-msg-head{display:flex;align-items:center;gap:6px;margin-bottom:2px}
.lfx .lfx-msg-role{font-weight:600;text-transform:capitalize;font-size:11px}
.lfx .lfx-msg-head .lfx-copy{margin-left:auto}
.lfx .lfx-field-name{margin-top:4px}
`;function P(e,t){e.append(r("style",{text:V+t}))}function D(e,t,n){let s=!1,o=()=>{s||(s=!0,n())},l=()=>{e.classList.contains("jupyter-widgets-disconnected")&&o()},f=new MutationObserver(l);f.observe(e,{attributes:!0,attributeFilter:["class"]}),queueMicrotask(l);let a=null;try{a=t?.widget_manager?.kernel??null}catch{a=null}let m=(g,d)=>{["starting","restarting","autorestarting","dead"].includes(d)&&o()};a?.statusChanged?.connect?.(m),a?.status==="dead"&&queueMicrotask(o);let x=null,y=(g,d)=>{if(d?.header?.msg_type==="shutdown_reply")return o();let b=d?.header?.session;typeof b!="string"||!b||(x===null?x=b:b!==x&&o())};return a?.iopubMessage?.connect?.(y),()=>{f.disconnect(),a?.statusChanged?.disconnect?.(m),a?.iopubMessage?.disconnect?.(y)}}function $(e,t){try{return e.send(t),!0}catch{return!1}}function A(e,t=60){let n=e.closest(".jp-OutputArea-child");n?n.classList.add("lfx-live-child"):t>0&&requestAnimationFrame(()=>A(e,t-1))}var E=class{constructor(t,n){S(this,"load",t);S(this,"apply",n);S(this,"seq",0);S(this,"listeners",new Set)}adopt(t){t&&typeof t=="object"&&this.load(t)&&(this.seq=typeof t.seq=="number"?t.seq:this.seq)}notify(){for(let t of this.listeners)t()}drawView(t,n,s,o){let l=0,f=()=>{l||(l=requestAnimationFrame(()=>{l=0,s()}))};this.listeners.add(f),s(),$(t,{kind:v.SYNC,seq:this.seq});let a=D(n,t,()=>{o(),f()});return()=>{a(),this.listeners.delete(f),l&&cancelAnimationFrame(l)}}follow(t){this.adopt(t.get("state")),t.on("change:state",()=>{let n=t.get("state");!n||typeof n.seq!="number"||(n.seq>this.seq||n.seq===0&&this.seq===0)&&(this.adopt(n),this.notify())}),t.on("msg:custom",n=>{if(n?.kind===v.EVENTS){if(typeof n.seq=="number"&&n.seq<=this.seq)return;this.seq=n.seq??this.seq;for(let s of n.events)this.apply(s)}else if(n?.kind===v.SNAPSHOT)this.adopt({...n.state,seq:n.seq});else return;this.notify()})}};function C(){return{title:"",status:"running",name:"batch",total:0,done:0,failed:0,running:0,left:0,resumed:0,elapsed_s:0,items_per_s:0,tokens_per_s:0,eta_s:null,requests:0,usage:{},cost:null,unpriced_models:[],errors:[],finished:!1,batch_node_id:null,session_id:null,opened:null,open_error:""}}var K=new Set(["opened","open_error","title"]);function B(e,t){if(t.op==="progress"){let n=t.progress;for(let[s,o]of Object.entries(n))K.has(s)||(e[s]=o)}else t.op==="open"&&(e.opened=t.type,e.open_error=t.open_error??"")}function p(e){return typeof e=="number"?e.toLocaleString("en-US"):"?"}function N(e,t){if(typeof e!="number"||!Number.isFinite(e))return`\u2014 ${t}/s`;let n=e>=100?0:e>=10?1:2;return`${e.toFixed(n)} ${t}/s`}function O(e){return typeof e!="number"||!Number.isFinite(e)||e<0?"unknown":e<10?`${e.toFixed(1)} s`:e<60?`${Math.round(e)} s`:e<3600?`${Math.floor(e/60)}m${String(Math.floor(e%60)).padStart(2,"0")}s`:`${Math.floor(e/3600)}h${String(Math.floor(e%3600/60)).padStart(2,"0")}m`}function H(e,t=[]){if(typeof e!="number")return"cost unknown";let n=e<.01?`$${e.toFixed(4)}`:`$${e.toFixed(2)}`;return t.length?`${n} + unknown (no price for ${t.join(", ")})`:n}function R(e){let t=e??{},n=t.prompt_tokens,s=t.completion_tokens,o=typeof t.total_tokens=="number"?t.total_tokens:typeof n=="number"&&typeof s=="number"?n+s:null;if(o===null)return"tokens unknown";let l=typeof n=="number"&&typeof s=="number"?` (${p(n)} in \xB7 ${p(s)} out)`:"";return`${p(o)} tokens${l}`}function I(e){return e.total?{done:Math.min(1,e.done/e.total),failed:Math.min(1,e.failed/e.total)}:{done:e.finished?1:0,failed:0}}var G=`
.lfx-bv{border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:4px;padding:6px 8px;background:var(--jp-layout-color0,#fff)}
.lfx-bv-head{display:flex;align-items:center;gap:8px;flex-wrap:wrap}
.lfx-bv-bar{position:relative;height:8px;border-radius:4px;margin:6px 0;background:var(--jp-layout-color2,#eee);overflow:hidden}
.lfx-bv-bar>span{position:absolute;top:0;bottom:0}
.lfx-bv-ok{left:0;background:var(--lfx-ok)}
.lfx-bv-bad{background:var(--lfx-bad)}
.lfx-bv-counts{display:flex;gap:14px;flex-wrap:wrap}
.lfx-bv-counts b{font-variant-numeric:tabular-nums}
.lfx-bv-stats{display:flex;gap:14px;flex-wrap:wrap;margin-top:2px}
.lfx-bv-groups{margin-top:6px;border-top:1px solid var(--jp-border-color2,#e0e0e0);padding-top:4px}
.lfx-bv-group{display:flex;gap:8px;align-items:baseline;padding:2px 0}
.lfx-bv .lfx-bv-group>*{flex:none;white-space:nowrap}
.lfx-bv .lfx-bv-group .lfx-bv-cls{font-weight:600}
.lfx-bv .lfx-bv-group .lfx-bv-msg{flex:1 1 auto;min-width:0;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.lfx-bv-group.lfx-bv-open{background:var(--jp-layout-color2,#f5f5f5)}
.lfx-bv-traces{margin-top:6px}
`,J={running:"running",done:"ok",stopped:"cancelled"},de=()=>{let e=C(),t=new E(n=>"done"in n?(Object.assign(e,C(),n),!0):!1,n=>B(e,n));return{initialize({model:n}){t.follow(n)},render({model:n,el:s}){let o=r("div",{class:"lfx lfx-bv"});P(o,G);let l=r("div",{class:"lfx-bv-head"}),f=r("div",{class:"lfx-bv-bar",role:"progressbar"}),a=r("span",{class:"lfx-bv-ok"}),m=r("span",{class:"lfx-bv-bad"});f.append(a,m);let x=r("div",{class:"lfx-bv-counts"}),y=r("div",{class:"lfx-bv-stats lfx-muted"}),g=r("div",{class:"lfx-bv-groups"}),d=r("div",{class:"lfx-bv-traces"});o.append(l,f,x,y,g,d),s.append(o),A(s);let b=!1,T="",j=null,q=async()=>{let c=String(n.get("explorer")??"");if(c===T||(T=c,j?.remove?.(),j=null,w(d),!c))return;let h=n.widget_manager;try{let u=await h.get_model(c.replace(/^IPY_MODEL_/,"")),i=await h.create_view(u,{});if(T!==c)return i.remove?.();j=i,d.append(i.el),i.trigger?.("displayed")}catch(u){d.append(r("div",{class:"lfx-err",text:`could not show the traces here: ${String(u)}`}))}},F=()=>{w(l);let c=e.status||"running";l.append(r("b",{class:"lfx-bv-title",text:e.title||e.name||"batch"}),r("span",{class:`lfx-st lfx-st-${J[c]??"running"}`,"data-status":c,text:c})),b&&!e.finished&&l.append(r("span",{class:"lfx-err",text:" kernel restarted \u2014 this batch stopped here"}));let h=I(e);a.style.width=`${(h.done*100).toFixed(2)}%`,m.style.left=`${(h.done*100).toFixed(2)}%`,m.style.width=`${(h.failed*100).toFixed(2)}%`,f.setAttribute("aria-valuenow",String(e.done+e.failed)),f.setAttribute("aria-valuemax",String(e.total??"")),w(x);let u=(i,k,_)=>r("span",{class:`lfx-bv-n lfx-bv-${_}`,"data-count":_},r("b",{text:p(k)}),` ${i}`);x.append(u("done",e.done,"done"),u("failed",e.failed,"failed"),u("running",e.running,"running"),u("left",e.left,"left"),r("span",{class:"lfx-muted",text:`of ${p(e.total)}${e.resumed?` (${p(e.resumed)} resumed)`:""}`})),w(y),y.append(r("span",{text:N(e.items_per_s,"items")}),r("span",{text:N(e.tokens_per_s,"tokens")}),r("span",{"data-eta":"",text:e.finished?`took ${O(e.elapsed_s)}`:`ETA ${O(e.eta_s)}`}),r("span",{text:`${p(e.requests)} requests`}),r("span",{"data-usage":"",text:R(e.usage)}),r("span",{"data-cost":"",text:H(e.cost,e.unpriced_models)})),w(g),g.style.display=e.errors.length?"":"none";for(let i of e.errors){let k=e.opened===i.type,_=i.node_ids.filter(M=>M).length,L=r("button",{class:"lfx-btn lfx-bv-open-btn",type:"button","data-group":i.type,text:k?"hide traces":`open traces (${_})`});L.disabled=!_,L.addEventListener("click",M=>{M.stopPropagation(),$(n,{kind:v.OPEN_GROUP,type:k?null:i.type})}),g.append(r("div",{class:`lfx-bv-group${k?" lfx-bv-open":""}`,"data-error":i.type},r("span",{class:"lfx-bv-cls lfx-err",text:i.type}),r("span",{class:"lfx-bv-cnt",text:`\xD7 ${p(i.count)}`}),r("span",{class:"lfx-err lfx-bv-msg",title:i.first_message,text:i.first_message}),r("span",{class:"lfx-muted",text:i.items.length?`items ${i.items.slice(0,5).join(", ")}${i.count>5?", \u2026":""}`:""}),L))}e.open_error&&g.append(r("div",{class:"lfx-err",text:e.open_error}))};n.on("change:explorer",()=>{q()});let z=t.drawView(n,s,F,()=>{b=!0});return q(),()=>{z(),j?.remove?.()}}}};export{de as default};
